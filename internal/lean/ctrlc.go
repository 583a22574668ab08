package lean

import (
	"io"
	"os"
	"os/signal"
	"sync"
)

// CtrlC makes a first Ctrl-C (SIGINT) say note on errw (InterruptNote, for
// an exec) and call interrupt, on a goroutine of its own, and a second one
// call again: a cell's way with Ctrl-C, in package early and in package
// cli alike.
//
// It ends when done is closed (nil: never): a Ctrl-C after that does
// nothing, and SIGINT stays caught, for a process about to exit, which
// need not wait for os/signal to let go. stop ends it too, and gives
// SIGINT back the action it had before (os/signal recorded it): nothing
// here ignores SIGINT, which would leave it ignored for good.
func CtrlC(note string, errw io.Writer, interrupt, again func(), done <-chan struct{}) (stop func()) {
	sig := make(chan os.Signal, 2)
	stopped := make(chan struct{})
	signal.Notify(sig, os.Interrupt)
	go func() {
		for n := 0; n < 2; n++ {
			select {
			case <-sig:
				select {
				case <-done: // both at once: the end came first
					return
				case <-stopped:
					return
				default:
				}
			case <-done:
				return
			case <-stopped:
				return
			}
			if n == 0 {
				io.WriteString(errw, note+"\n")
				go interrupt()
			} else {
				again()
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			signal.Stop(sig)
			close(stopped)
		})
	}
}
