//go:build race

package hubtest

// Race is set when the test binary is built with -race: the hub's replhub
// binary is then built with -race too, so that the hub's relay and
// transfer code is raced in the end-to-end tests (the CLI's is a plain
// build, see the package doc). Tests that measure the hub's memory or
// speed allow for the race detector's cost when it is set.
const Race = true
