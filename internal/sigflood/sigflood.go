// Package sigflood sends a process SIGINTs without a pause (kill -INT in a
// loop, a Ctrl-C held down), for tests of what a flood of them must not
// break. It is for tests only.
package sigflood

import (
	"os"
	"sync"
	"syscall"
	"time"
)

// Start floods pid with SIGINTs, eight at a time with a 20 µs pause
// between, until the returned stop is first called (or ten million
// went); stop returns once the flood has ended.
func Start(pid int) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 10_000_000; i++ {
			select {
			case <-done:
				return
			default:
			}
			syscall.Kill(pid, syscall.SIGINT)
			if i%8 == 7 {
				time.Sleep(20 * time.Microsecond)
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done) }); wg.Wait() }
}

// For is how long a test floods: 1.5 s, or $REPLHUB_FLOOD (a Go duration:
// "30s") for a soak run of the flood tests alone. The tests run a flood
// for each of some eighty cases (every Python, every kind of cell), which
// keep both cores busy for as long as it lasts.
func For() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("REPLHUB_FLOOD")); err == nil && d > 0 {
		return d
	}
	return 1500 * time.Millisecond
}

// Cells is how many cells a flood runs at most, however soon: 2000, or
// more for a soak's longer For (2000 every 3 s), so that a fast machine
// does not end a soak early.
func Cells() int {
	return max(2000, int(2000*For()/(3*time.Second)))
}
