package boot

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A flood of SIGINTs (a user's Ctrl-C held down, a script's kill -INT in a
// loop) while cells run: each cell ends, ok or with KeyboardInterrupt, and
// once the flood stops the session answers an interrupt at once and runs
// the next cell. A KeyboardInterrupt that landed as the worker took one of
// its locks on the way out of a cell held it for good: the reader, which
// takes it for every interrupt and query, was wedged.
func TestSigintFlood(t *testing.T) {
	eachPython(t, func(t *testing.T, py string) { eachMode(t, py, sigintFlood) })
}

func sigintFlood(t *testing.T, w *worker) {
	pid := w.cmd.Process.Pid
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 2_000_000; i++ {
			select {
			case <-stop:
				return
			default:
			}
			syscall.Kill(pid, syscall.SIGINT)
			if i%8 == 7 {
				time.Sleep(20 * time.Microsecond)
			}
		}
	}()
	deadline := time.Now().Add(4 * time.Second)
	cells, interrupted := 0, 0
	for time.Now().Before(deadline) && cells < 2000 {
		done := w.run("x = 1\nfor _ in range(3):\n    x += 1", 10*time.Second)
		if s := done.str("status"); s != "ok" {
			require.Equal(t, "KeyboardInterrupt", done.errType(), "%s", done.line)
			interrupted++
		}
		cells++
	}
	close(stop)
	wg.Wait()
	t.Logf("%d cells under the flood, %d of them interrupted", cells, interrupted)
	require.NotZero(t, interrupted, "the flood reached no cell")

	// A cell that sleeps is interrupted at once: the reader takes the
	// lock the main thread let go of (a cell pipe's main thread waits
	// for cells in select, with the lock let go).
	started := filepath.Join(w.dir, "started")
	cell := w.exec(fmt.Sprintf("import time\nopen(%s, 'w').close()\ntime.sleep(30)", pyStr(started)))
	waitFile(t, started, 10*time.Second)
	t0 := time.Now()
	w.send(map[string]any{"op": "interrupt", "cell": cell}, nil)
	select {
	case f := <-w.frames:
		assert.Equal(t, "interrupted", f.op(), "%s", f.line)
		assert.Equal(t, "delivered", f.str("how"), "%s", f.line)
	case <-time.After(5 * time.Second):
		t.Fatalf("the interrupt was not answered within 5s")
	}
	done, _ := w.until("done", 5*time.Second, nil)
	assert.Equal(t, "KeyboardInterrupt", done.errType(), "%s", done.line)
	assert.Less(t, time.Since(t0), 5*time.Second)
	w.healthy()
}

// A serve is cancelled once: the hub cancels a serve whose link failed,
// and again when it is asked to interrupt it. A second KeyboardInterrupt
// would land in the first one's unwinding (here, the called function's
// handler of the first).
func TestCancelTwice(t *testing.T) {
	eachPython(t, func(t *testing.T, py string) {
		w := startWorker(t, py)
		pyVersion := w.ready.str("python")
		pyVersion = pyVersion[:strings.LastIndexByte(pyVersion, '.')]
		napping := filepath.Join(w.dir, "napping")
		w.run(fmt.Sprintf(`def nap():
    import time
    try:
        open(%s, 'w').close()
        time.sleep(30)
    except KeyboardInterrupt:
        time.sleep(1)
        return "cancelled once"`, pyStr(napping)), 10*time.Second)
		blob, err := exec.Command(py, "-c", "import pickle, sys; sys.stdout.buffer.write(pickle.dumps(('name', 'nap', (), {}), 2))").Output()
		require.NoError(t, err)
		w.send(map[string]any{"op": "serve", "sid": 1, "kind": "call", "from": "t", "py": pyVersion}, blob)
		waitFile(t, napping, 10*time.Second)
		w.send(map[string]any{"op": "cancel", "sid": 1}, nil)
		time.Sleep(100 * time.Millisecond)
		w.send(map[string]any{"op": "cancel", "sid": 1}, nil)
		last := w.read(10 * time.Second)
		require.Equal(t, "served", last.op(), "%s", last.line)
		assert.Equal(t, true, last.h["ok"], "%s", last.line)
		w.healthy()

		// The next serve's cancel interrupts it.
		require.NoError(t, os.Remove(napping))
		w.send(map[string]any{"op": "serve", "sid": 2, "kind": "call", "from": "t", "py": pyVersion}, blob)
		waitFile(t, napping, 10*time.Second)
		w.send(map[string]any{"op": "cancel", "sid": 2}, nil)
		last = w.read(10 * time.Second)
		require.Equal(t, "served", last.op(), "%s", last.line)
		assert.Equal(t, true, last.h["ok"], "%s", last.line)
	})
}
