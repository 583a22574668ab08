// Package testbound fails a test whose step does not return in time, such
// as a read that a FIFO would block for good. It is for tests only.
package testbound

import (
	"testing"
	"time"
)

// Within runs f and fails t when f has not returned after d; what names
// the step in the failure. f runs on its own goroutine, so a blocked f is
// left behind when the test ends.
func Within(t testing.TB, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not return within %s", what, d)
	}
}
