//go:build race

package hub

// raceBuilt is set when the test binary is built with -race.
const raceBuilt = true
