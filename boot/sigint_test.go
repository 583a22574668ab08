package boot

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/internal/sigflood"
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
	floodWith(t, w, "x = 1\nfor _ in range(3):\n    x += 1")
}

// floodKeepsFds floods w with code (floodWith) and checks that at most
// slack more fds are open after it than before; it returns the cells run.
func floodKeepsFds(t *testing.T, w *worker, code string, slack int) int {
	t.Helper()
	before := openFds(t, w.cmd.Process.Pid)
	cells := floodWith(t, w, code)
	assert.LessOrEqual(t, openFds(t, w.cmd.Process.Pid), before+slack, "open files after %d cells", cells)
	return cells
}

// floodWith floods w with cells of code (flood), which the flood must
// reach, and checks that an interrupt is answered at once after it; it
// returns how many cells ran.
func floodWith(t *testing.T, w *worker, code string) int {
	cells, interrupted := flood(t, w, func(int) {}, func(w *worker) int { return w.exec(code) })
	require.NotZero(t, interrupted, "the flood reached none of %d cells", cells)
	interruptedAtOnce(t, w)
	return cells
}

// runOK runs code in a cell, which must end ok.
func runOK(t *testing.T, w *worker, code string) {
	w.exec(code)
	done, _ := w.until("done", 10*time.Second, nil)
	require.Equal(t, "ok", done.str("status"), "%s", done.line)
}

// The same while each cell waits for the replies to requests of its own
// (up to 50 calls of sessions(), most cut at the first or second; a put,
// a get or a call waits the same way): the reader, which sets each reply,
// never waits for a lock that a KeyboardInterrupt left taken.
func TestSigintFloodRequests(t *testing.T) {
	eachPython(t, func(t *testing.T, py string) {
		w := startWorker(t, py)
		w.exec("sessions()") // the toolkit loads before the flood
		req, _ := w.until("req", 10*time.Second, nil)
		w.send(map[string]any{"op": "reply", "id": req.num("id"), "ok": true, "sessions": []any{}}, nil)
		w.until("done", 10*time.Second, nil)
		reqs := 0
		cells, interrupted := flood(t, w, func(int) { reqs++ }, func(w *worker) int {
			return w.exec("for i in range(50):\n    sessions()")
		})
		require.NotZero(t, reqs, "no request was made")
		require.NotZero(t, interrupted, "the flood reached none of %d cells", cells)
		interruptedAtOnce(t, w)
	})
}

// The same while each cell takes the toolkit's own locks, which the
// worker takes again at a cell's end: bg()'s table of jobs, whose ended
// ones each cell's end reports, the items a display() queues for the
// done frame, and the lock of the toolkit's load, which each display()
// took. Up to 3.10, a KeyboardInterrupt between a with block's end and
// its lock's release kept the lock, and the cell's end waited for it for
// ever.
func TestSigintFloodToolkitLocks(t *testing.T) {
	eachPython(t, func(t *testing.T, py string) {
		w := startWorker(t, py)
		runOK(t, w, "bg()\ndisplay('x')")
		floodWith(t, w, "for _ in range(100):\n    bg()\n    display('x')")
	})
}

// The same while each cell runs commands through the toolkit (sh, and
// grep's search program): each interrupted one is ended, its pipes
// closed and its process reaped, and the worker lives on. A
// KeyboardInterrupt raised in the worker's own code around the cell
// ended the worker; one inside Popen.poll kept Popen's lock, on which
// the command's end then waited for ever; and the cleanups, cut short by
// the next one, left hundreds of pipes open.
func TestSigintFloodCommands(t *testing.T) {
	eachPython(t, func(t *testing.T, py string) {
		w := startWorker(t, py)
		runOK(t, w, "sh('true')\ngrep('root', '/etc/passwd')")
		floodKeepsFds(t, w, "for _ in range(20):\n    sh('true')\n    grep('root', '/etc/passwd')\n    read('/etc/hostname')", 10)
		// Python reaps a command whose Popen was dropped unreaped at the
		// next command's start (subprocess._cleanup): 3.6 and 3.7 drop one
		// now and then under the flood.
		runOK(t, w, "sh('true')")
		assert.Eventually(t, func() bool { return len(children(w.cmd.Process.Pid)) == 0 },
			5*time.Second, 20*time.Millisecond, "processes left: %v", children(w.cmd.Process.Pid))
	})
}

// The same while each cell writes and edits a file and a memory entry,
// prints, and waits for a background job: no temporary file and no fd is
// left behind, and the file is always one whole version of it. The
// temporary files of writes cut short by a KeyboardInterrupt were left in
// the file's folder by the hundred, with their fds open.
func TestSigintFloodFiles(t *testing.T) {
	eachPython(t, func(t *testing.T, py string) {
		mem := t.TempDir()
		w := startWorkerEnv(t, py, []string{"REPLHUB_MEMORY_DIR=" + mem})
		dir := t.TempDir()
		f := filepath.Join(dir, "f.txt")
		runOK(t, w, fmt.Sprintf("F, N = %s, 0\nwrite(F, 'a\\nb0\\n')\nbg('true').wait()\nmemory.write('e', 'one', index='hook')", pyStr(f)))
		// Every other cell writes the memory entry: nearly every cell is
		// cut short within its first steps.
		floodKeepsFds(t, w, "N += 1\nfor i in range(20):\n"+
			"    if N % 2:\n        memory.write('e', 'one %d' % i, index='hook %d' % i)\n        memory.edit('e', 'one', 'two')\n"+
			"        memory.read('e')\n        continue\n"+
			"    write(F, 'a\\nb%d\\n' % i)\n    edit(F, 'b%d' % i, 'c%d' % i)\n"+
			"    sed(F, '[bc]', 'd')\n    print('line', i)\n    bg('true').wait()\n    readn(F)", 0)
		for _, d := range []string{dir, mem} {
			ents, err := os.ReadDir(d)
			require.NoError(t, err)
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			require.Subset(t, []string{"f.txt", "e.md", "MEMORY.md"}, names, "files left")
		}
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		assert.Regexp(t, `^a\n[bcd]\d+\n$`, string(b))
		b, err = os.ReadFile(filepath.Join(mem, "MEMORY.md"))
		require.NoError(t, err)
		assert.Regexp(t, `^- \[e\]\(e\.md\) — hook( \d+)?\n$`, string(b))
		assert.Eventually(t, func() bool { return len(children(w.cmd.Process.Pid)) == 0 },
			5*time.Second, 20*time.Millisecond, "processes left: %v", children(w.cmd.Process.Pid))
	})
}

// The same while cells await (top-level await, 3.8 on): once the flood
// stops, a cell that awaits runs. A KeyboardInterrupt raised in the event
// loop's own start or end of a run left the loop marked as running, and
// every later cell that awaited failed ("This event loop is already
// running"): on 3.8 to 3.10, in every run. Under the flood a few cells
// still end with the loop's "Event loop stopped before Future completed"
// or CancelledError rather than KeyboardInterrupt.
func TestSigintFloodAwait(t *testing.T) {
	eachPython(t, func(t *testing.T, py string) {
		w := startWorker(t, py)
		w.exec("import asyncio\nawait asyncio.sleep(0)")
		if done, _ := w.until("done", 10*time.Second, nil); done.str("status") != "ok" {
			t.Skip("no top-level await before 3.8")
		}
		stop := sigflood.Start(w.cmd.Process.Pid)
		ended := map[string]int{}
		for n, deadline := 0, time.Now().Add(sigflood.For()); time.Now().Before(deadline) && n < sigflood.Cells(); n++ {
			w.exec("for i in range(20):\n    await asyncio.sleep(0)\n    print(i)")
			done, _ := w.until("done", 10*time.Second, nil)
			ended[done.errType()]++
		}
		stop()
		t.Logf("cells under the flood, by how they ended: %v", ended)
		require.NotZero(t, ended["KeyboardInterrupt"], "the flood reached no cell")
		interruptedAtOnce(t, w)
		w.exec("await asyncio.sleep(0.01)\n1")
		done, _ := w.until("done", 10*time.Second, nil)
		assert.Equal(t, "ok", done.str("status"), "%s", done.line)
	})
}

// grep's search program runs in a function where a SIGINT is kept
// pending, so that its end runs whole (_output): an interrupt still stops
// a search at once, for the program's output is read in another frame.
// Here the program reads a FIFO that nobody writes to.
func TestInterruptStopsGrep(t *testing.T) {
	if _, err := exec.LookPath("rg"); err != nil {
		// Without it, grep reads no FIFO: the cell ends at once.
		t.Skip("needs rg (ripgrep), which the README's test command installs")
	}
	eachPython(t, func(t *testing.T, py string) {
		w := startWorker(t, py)
		fifo, started := filepath.Join(w.dir, "fifo"), filepath.Join(w.dir, "started")
		require.NoError(t, syscall.Mkfifo(fifo, 0o600))
		cell := w.exec(fmt.Sprintf("open(%s, 'w').close()\ngrep('x', %s)", pyStr(started), pyStr(fifo)))
		waitFile(t, started, 10*time.Second)
		time.Sleep(300 * time.Millisecond) // the program reads by now
		t0 := time.Now()
		w.send(map[string]any{"op": "interrupt", "cell": cell}, nil)
		done, _ := w.until("done", 10*time.Second, nil)
		assert.Equal(t, "KeyboardInterrupt", done.errType(), "%s", done.line)
		assert.Less(t, time.Since(t0), 5*time.Second)
		assert.Eventually(t, func() bool { return len(children(w.cmd.Process.Pid)) == 0 },
			5*time.Second, 20*time.Millisecond, "processes left: %v", children(w.cmd.Process.Pid))
	})
}

func openFds(t *testing.T, pid int) int {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	require.NoError(t, err)
	return len(fds)
}

// children lists pid's child processes, zombies too.
func children(pid int) []string {
	var kids []string
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		b, err := os.ReadFile(p)
		i := bytes.LastIndexByte(b, ')')
		if err != nil || i < 0 {
			continue
		}
		if f := strings.Fields(string(b[i+1:])); len(f) > 1 && f[1] == strconv.Itoa(pid) {
			kids = append(kids, string(b[:i+1])+" "+f[0])
		}
	}
	return kids
}

// flood sends w's worker SIGINTs without a pause while cells that start
// runs, for sigflood.For() (1.5 s) or sigflood.Cells() (2000); it
// answers every request a cell makes (req counts them), and returns how
// many cells ran and how many ended with KeyboardInterrupt. While none
// has, it goes on, up to 10 s and 20000
// cells: the signals of a flood that meets short cells on a busy machine
// land between cells for the most part (1 to 11 cells in 2000 here, and
// at times none). A cell that ends otherwise than ok or so, or a worker
// that stops answering, fails t.
func flood(t *testing.T, w *worker, req func(int), start func(w *worker) int) (cells, interrupted int) {
	defer sigflood.Start(w.cmd.Process.Pid)()
	for t0 := time.Now(); !floodEnough(time.Since(t0), cells, interrupted); cells++ {
		cell := start(w)
		for {
			f := w.read(10 * time.Second)
			if f.op() == "req" && f.str("kind") == "cancel" {
				continue // see TestRequestLeftOpenIsCancelled
			}
			if f.op() == "req" {
				req(cell)
				w.send(map[string]any{"op": "reply", "id": f.num("id"), "ok": true, "sessions": []any{}}, nil)
				continue
			}
			require.NotEqual(t, "error", f.op(), "the worker's reader failed: %s", f.line)
			if f.op() != "done" || f.num("cell") != int64(cell) {
				continue
			}
			if f.str("status") != "ok" {
				require.True(t, interruptedError(f), "%s", f.line)
				interrupted++
			}
			break
		}
	}
	t.Logf("%d cells under the flood, %d of them interrupted", cells, interrupted)
	return cells, interrupted
}

// floodEnough says whether a flood that has run for d, through cells
// cells, interrupted of them, is over (see flood).
func floodEnough(d time.Duration, cells, interrupted int) bool {
	if interrupted == 0 {
		return d > 10*time.Second || cells >= 20000
	}
	return d > sigflood.For() || cells >= sigflood.Cells()
}

// interruptedError says whether f, a done frame, ended with a
// KeyboardInterrupt, or with the SystemError that Python raises for one
// raised inside some of its calls (os.lstat, os.stat): "returned a
// result with an error set" on 3.6 and 3.7, "... with an exception set"
// (seen once on 3.10, in os.lstat), of which the KeyboardInterrupt is the
// direct cause.
func interruptedError(f frame) bool {
	if f.errType() == "KeyboardInterrupt" {
		return true
	}
	e, _ := f.h["error"].(map[string]any)
	tb, _ := e["traceback"].(string)
	msg, _ := e["message"].(string)
	cause := "KeyboardInterrupt\n\nThe above exception was the direct cause of the following exception:\n\n"
	set := strings.Contains(msg, "returned a result with an error set") ||
		strings.Contains(msg, "returned a result with an exception set")
	return f.errType() == "SystemError" && set &&
		(strings.HasPrefix(tb, cause) || strings.Contains(tb, "\n"+cause))
}

// interruptedAtOnce checks that an interrupt of a cell that sleeps is
// answered, and ends it, at once: the reader takes the session's lock,
// which the main thread let go of.
func interruptedAtOnce(t *testing.T, w *worker) {
	started := filepath.Join(w.dir, "started")
	cell := w.exec(fmt.Sprintf("import time\nopen(%s, 'w').close()\ntime.sleep(30)", pyStr(started)))
	waitFile(t, started, 10*time.Second)
	t0 := time.Now()
	w.send(map[string]any{"op": "interrupt", "cell": cell}, nil)
	for answered := false; !answered; {
		select {
		case f := <-w.frames:
			if f.op() == "req" && f.str("kind") == "cancel" {
				continue // of a request a cell under the flood left (TestRequestLeftOpenIsCancelled)
			}
			assert.Equal(t, "interrupted", f.op(), "%s", f.line)
			assert.Equal(t, "delivered", f.str("how"), "%s", f.line)
			answered = true
		case <-time.After(time.Until(t0.Add(5 * time.Second))):
			t.Fatalf("the interrupt was not answered within 5s")
		}
	}
	done, _ := w.until("done", 5*time.Second, nil)
	assert.Equal(t, "KeyboardInterrupt", done.errType(), "%s", done.line)
	assert.Less(t, time.Since(t0), 5*time.Second)
	w.healthy()
}

// A request that a cell's code left without an end (here on purpose; a
// second KeyboardInterrupt can make its cancel lost as the first one
// unwinds the wait) is cancelled once the cell's code is over, before its
// done frame, so that the next cell finds the target free; a request
// that ended is not.
func TestRequestLeftOpenIsCancelled(t *testing.T) {
	eachPython(t, func(t *testing.T, py string) {
		w := startWorker(t, py)
		reply := func(req frame) {
			w.send(map[string]any{"op": "reply", "id": req.num("id"), "ok": true, "sessions": []any{}}, nil)
		}
		w.exec("sessions()")
		req, _ := w.until("req", 10*time.Second, nil)
		reply(req)
		w.until("done", 10*time.Second, nil)

		w.exec("import replhub_toolkit.relay as _t\nrid, _ = _t._link.start('sessions')")
		req, _ = w.until("req", 10*time.Second, nil)
		require.Equal(t, "sessions", req.str("kind"), "%s", req.line)
		done, before := w.until("done", 10*time.Second, nil)
		require.Equal(t, "ok", done.str("status"), "%s", done.line)
		var cancels []frame
		for _, f := range before {
			if f.op() == "req" {
				cancels = append(cancels, f)
			}
		}
		require.Len(t, cancels, 1, "one cancel before the done frame: %v", before)
		assert.Equal(t, "cancel", cancels[0].str("kind"), "%s", cancels[0].line)
		assert.Equal(t, req.num("id"), cancels[0].num("id"), "%s", cancels[0].line)
		reply(req) // its reply still comes, and is dropped

		// A pull's transfer lasts past its reply: a pull left after it is
		// cancelled too.
		w.exec("rid, slot = _t._link.start('pull', target='t', path='/p')\nslot.wait()")
		req, _ = w.until("req", 10*time.Second, nil)
		require.Equal(t, "pull", req.str("kind"), "%s", req.line)
		w.send(map[string]any{"op": "reply", "id": req.num("id"), "ok": true, "size": 1}, nil)
		done, before = w.until("done", 10*time.Second, nil)
		require.Equal(t, "ok", done.str("status"), "%s", done.line)
		require.Len(t, before, 1, "one cancel before the done frame: %v", before)
		assert.Equal(t, "cancel", before[0].str("kind"), "%s", before[0].line)
		assert.Equal(t, req.num("id"), before[0].num("id"), "%s", before[0].line)

		w.exec("sessions()")
		req, _ = w.until("req", 10*time.Second, nil)
		reply(req)
		w.until("done", 10*time.Second, nil)
		select {
		case f := <-w.frames:
			t.Fatalf("a frame after an ended request's cell: %s", f.line)
		case <-time.After(300 * time.Millisecond):
		}
		w.healthy()
	})
}

// Ctrl-C stops a large write() at once: its bytes go a chunk at a time
// (atomic.WRITE_CHUNK), between which a KeyboardInterrupt may come, and
// the old file stays, with nothing left beside it. Written in one call in
// the guarded frame, the rest of 512 MB and their sync went first: the
// interrupt took 1.7 to 1.8 s here, against some 80 ms. One Python: the
// guard is the worker's own on every one.
func TestInterruptStopsALargeWrite(t *testing.T) {
	w := startWorker(t, newestPython(t))
	dir := t.TempDir()
	target := filepath.Join(dir, "big")
	require.NoError(t, os.WriteFile(target, []byte("old"), 0o600))
	cell := w.exec(fmt.Sprintf("write(%s, b'x' * (512 << 20))", pyStr(target)))
	// The temporary file beside it, being written.
	require.Eventually(t, func() bool {
		names, _ := filepath.Glob(filepath.Join(dir, ".big.*"))
		for _, n := range names {
			if fi, err := os.Stat(n); err == nil && fi.Size() > 0 {
				return true
			}
		}
		return false
	}, 30*time.Second, time.Millisecond)
	t0 := time.Now()
	w.send(map[string]any{"op": "interrupt", "cell": cell}, nil)
	done, _ := w.until("done", 30*time.Second, nil)
	took := time.Since(t0)
	assert.Equal(t, "KeyboardInterrupt", done.errType(), "%s", done.line)
	assert.Less(t, took, time.Second, "the interrupt waited for the write")
	got, err := os.ReadFile(target)
	require.NoError(t, err)
	assert.Equal(t, "old", string(got[:min(len(got), 10)]), "the file was replaced (%d bytes)", len(got))
	entries, _ := os.ReadDir(dir)
	assert.Len(t, entries, 1, "left in the folder: %v", entries)
}

// The same while cells look at files for a NUL, as grep() does at each
// file with a match: the look's fd is closed whatever a SIGINT cuts. Its
// close, in a finally clause of a frame not guarded, could be cut short.
func TestSigintFloodBinaryLook(t *testing.T) {
	eachPython(t, func(t *testing.T, py string) {
		w := startWorker(t, py)
		runOK(t, w, "from replhub_toolkit.files import _is_binary as _ib\n_ib('/etc/passwd')")
		floodKeepsFds(t, w, "for _ in range(200):\n    _ib('/etc/passwd')", 0)
	})
}

// The done frames a flood's interrupt ends a cell with: a
// KeyboardInterrupt, or Python's SystemError caused by one, in either of
// its wordings; not a SystemError of its own.
func TestInterruptedError(t *testing.T) {
	cause := "KeyboardInterrupt\n\nThe above exception was the direct cause of the following exception:\n\nTraceback (most recent call last):\n  File \"<cell-107>\", line 8, in <module>\n"
	for _, c := range []struct {
		typ, msg, tb string
		want         bool
	}{
		{"KeyboardInterrupt", "", "Traceback ...", true},
		{"SystemError", "<built-in function lstat> returned a result with an error set", cause, true},
		{"SystemError", "_PyEval_EvalFrameDefault returned a result with an exception set", cause, true},
		{"SystemError", "_PyEval_EvalFrameDefault returned a result with an exception set", "Traceback (most recent call last):\n", false},
		{"SystemError", "something else", cause, false},
		{"ValueError", "", cause, false},
	} {
		f := frame{h: map[string]any{"op": "done", "error": map[string]any{"type": c.typ, "message": c.msg, "traceback": c.tb}}}
		assert.Equal(t, c.want, interruptedError(f), "%s: %s", c.typ, c.msg)
	}
}
