//go:build !race

package hubtest

// raceBuild is set when the test binary is built with -race (see race.go).
const raceBuild = false
