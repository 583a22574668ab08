//go:build race

package hubtest

// raceBuild is set when the test binary is built with -race: the replhub
// binary it runs is then built with -race too, so that the hub's relay and
// transfer code is raced in the end-to-end tests.
const raceBuild = true
