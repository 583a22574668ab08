//go:build !linux

package hub

// awaitExit returns at once: the caller's wait blocks a thread until the
// process exits.
func awaitExit(int) {}
