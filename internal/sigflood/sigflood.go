// Package sigflood sends a process SIGINTs without a pause (kill -INT in a
// loop, a Ctrl-C held down), for tests of what a flood of them must not
// break. It is for tests only.
package sigflood

import (
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
