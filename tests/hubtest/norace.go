//go:build !race

package hubtest

// Race is set when the test binary is built with -race (see race.go).
const Race = false
