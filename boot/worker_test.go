package boot

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/internal/procstat"
	"github.com/replhub/replhub/tests/hubtest"
)

// These tests start the real worker with every Python 3.6-3.13 found on
// the machine and talk to it as the hub does: raw frames over its pipes.

// maxHeader is the hub's bound on a worker's frame header line.
const maxHeader = 1 << 20

// pythons finds one interpreter per minor version 3.6 to 3.14: pyenv's,
// then python3.N on PATH; at least python3.
func pythons(t *testing.T) map[string]string {
	t.Helper()
	found := map[string]string{}
	var roots []string
	if out, err := exec.Command("pyenv", "root").Output(); err == nil {
		roots = append(roots, strings.TrimSpace(string(out)))
	}
	if h, err := os.UserHomeDir(); err == nil {
		roots = append(roots, filepath.Join(h, ".pyenv"))
	}
	for _, root := range roots {
		dirs, _ := filepath.Glob(filepath.Join(root, "versions", "3.*", "bin"))
		sort.Strings(dirs)
		for _, d := range dirs {
			for minor := 6; minor <= 14; minor++ {
				v := fmt.Sprintf("3.%d", minor)
				p := filepath.Join(d, "python"+v)
				if _, ok := found[v]; !ok && isExecutable(p) {
					found[v] = p
				}
			}
		}
	}
	for minor := 6; minor <= 14; minor++ {
		v := fmt.Sprintf("3.%d", minor)
		if _, ok := found[v]; ok {
			continue
		}
		if p, err := exec.LookPath("python" + v); err == nil && !strings.Contains(p, "/shims/") {
			found[v] = p
		}
	}
	if len(found) == 0 {
		p, err := exec.LookPath("python3")
		if err != nil {
			t.Skip("no python3")
		}
		found["python3"] = p
	}
	return found
}

// newestPython is the newest of pythons(t), for a test that needs one.
func newestPython(t *testing.T) string {
	var newest, path string
	for v, p := range pythons(t) {
		if newest == "" || minorOf(newest) < minorOf(v) {
			newest, path = v, p
		}
	}
	return path
}

// minorOf is the minor of a version "3.N" (0 for "python3").
func minorOf(v string) int {
	var m int
	fmt.Sscanf(v, "3.%d", &m)
	return m
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// eachPython runs f as a parallel subtest for every Python found.
func eachPython(t *testing.T, f func(t *testing.T, py string)) {
	ps := pythons(t)
	vs := make([]string, 0, len(ps))
	for v := range ps {
		vs = append(vs, v)
	}
	sort.Strings(vs)
	for _, v := range vs {
		py := ps[v]
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			f(t, py)
		})
	}
}

// frame is one frame from the worker: its header decoded, its header line
// as sent, and the bytes that followed.
type frame struct {
	h    map[string]any
	line []byte
	data []byte
	err  error // the stream broke here (or ended: io.EOF)
}

func (f frame) op() string { s, _ := f.h["op"].(string); return s }

func (f frame) str(k string) string { s, _ := f.h[k].(string); return s }

func (f frame) num(k string) int64 { n, _ := f.h[k].(float64); return int64(n) }

// errType is a done frame's error type.
func (f frame) errType() string {
	e, _ := f.h["error"].(map[string]any)
	s, _ := e["type"].(string)
	return s
}

// worker is a running worker.py, started as the hub starts it: the leader
// of its own process group.
type worker struct {
	t   *testing.T
	dir string
	cmd *exec.Cmd
	in  io.WriteCloser
	// cells, when set, takes the exec frames (the worker's --cells pipe,
	// as a local hub starts it); in takes all the others.
	cells  io.WriteCloser
	frames chan frame
	wmu    sync.Mutex
	out    hubtest.LockedBuffer
	ready  frame
	cell   int
	qid    int
}

func startWorker(t *testing.T, py string, args ...string) *worker {
	t.Helper()
	return startWorkerEnv(t, py, nil, args...)
}

// startWorkerEnv starts a worker with env added to the test's environment.
func startWorkerEnv(t *testing.T, py string, env []string, args ...string) *worker {
	t.Helper()
	return startWorkerWith(t, py, env, false, args...)
}

// startWorkerCells starts a worker whose exec frames go on a pipe of their
// own, as a local hub starts one.
func startWorkerCells(t *testing.T, py string, args ...string) *worker {
	t.Helper()
	return startWorkerWith(t, py, nil, true, args...)
}

// eachMode runs f with a worker that takes its exec frames on stdin, as a
// remote one does, and with one that takes them on their own pipe.
func eachMode(t *testing.T, py string, f func(t *testing.T, w *worker)) {
	for _, cells := range []bool{false, true} {
		name := "stdin"
		if cells {
			name = "cells"
		}
		t.Run(name, func(t *testing.T) { f(t, startWorkerWith(t, py, nil, cells)) })
	}
}

func startWorkerWith(t *testing.T, py string, env []string, cells bool, args ...string) *worker {
	t.Helper()
	dir := t.TempDir()
	path, err := Install(dir)
	require.NoError(t, err)
	w := &worker{t: t, dir: dir, frames: make(chan frame, 256)}
	if cells {
		args = append([]string{"--cells", "3"}, args...)
	}
	w.cmd = exec.Command(py, append([]string{path, "--stdio"}, args...)...)
	w.cmd.Dir = dir
	if env != nil {
		w.cmd.Env = append(os.Environ(), env...)
	}
	if cells {
		r, cw, err := os.Pipe()
		require.NoError(t, err)
		w.cmd.ExtraFiles = []*os.File{r}
		w.cells = cw
		defer r.Close()
		t.Cleanup(func() { cw.Close() })
	}
	w.cmd.Stderr = &w.out
	w.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	w.in, err = w.cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := w.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, w.cmd.Start())
	pid := w.cmd.Process.Pid
	waited := make(chan struct{})
	go func() {
		w.readFrames(stdout)
		w.cmd.Wait()
		close(waited)
	}()
	t.Cleanup(func() {
		syscall.Kill(-pid, syscall.SIGKILL)
		w.in.Close()
		select {
		case <-waited:
		case <-time.After(10 * time.Second):
			t.Errorf("worker %d not reaped", pid)
		}
		if t.Failed() {
			t.Logf("worker output:\n%s", truncate(w.out.String(), 4000))
		}
	})
	w.ready = w.read(10 * time.Second)
	require.Equal(t, "ready", w.ready.op(), "first frame")
	require.EqualValues(t, 2, w.ready.num("proto"))
	return w
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n/2] + "\n[...]\n" + s[len(s)-n/2:]
}

// readFrames parses the worker's frames until its stdout ends; every
// header line must be JSON and under the hub's bound.
func (w *worker) readFrames(r io.Reader) {
	defer close(w.frames)
	br := bufio.NewReaderSize(r, 1<<16)
	for {
		line, err := readLine(br)
		if err != nil {
			w.frames <- frame{err: err}
			return
		}
		f := frame{line: line}
		if len(line) >= maxHeader {
			w.frames <- frame{line: line[:200], err: fmt.Errorf("a header line of %d bytes", len(line))}
			return
		}
		if err := json.Unmarshal(line, &f.h); err != nil {
			w.frames <- frame{line: line, err: fmt.Errorf("torn frame: %v: %.200q", err, line)}
			return
		}
		if n, ok := f.h["len"].(float64); ok && n > 0 {
			f.data = make([]byte, int(n))
			if _, err := io.ReadFull(br, f.data); err != nil {
				w.frames <- frame{err: err}
				return
			}
		}
		w.frames <- f
	}
}

func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			return nil, err
		}
		return line[:len(line)-1], nil
	}
}

// read returns the next frame, failing the test at a broken stream or
// after d.
func (w *worker) read(d time.Duration) frame {
	w.t.Helper()
	select {
	case f, ok := <-w.frames:
		if !ok {
			w.t.Fatalf("the worker's frame stream has ended")
		}
		require.NoError(w.t, f.err, "frame stream")
		return f
	case <-time.After(d):
		// A worker that stops answering leaves its threads' stacks in its
		// output, which the test prints: faulthandler dumps them at SIGABRT.
		w.cmd.Process.Signal(syscall.SIGABRT)
		time.Sleep(time.Second)
		w.t.Fatalf("no frame from the worker in %s", d)
	}
	return frame{}
}

// until reads frames up to the first of op (for which match, if given,
// says true); it returns that frame and those before it.
func (w *worker) until(op string, d time.Duration, match func(frame) bool) (frame, []frame) {
	w.t.Helper()
	deadline := time.Now().Add(d)
	var before []frame
	for {
		f := w.read(time.Until(deadline))
		if f.op() == op && (match == nil || match(f)) {
			return f, before
		}
		before = append(before, f)
	}
}

func (w *worker) send(h map[string]any, data []byte) {
	w.t.Helper()
	if data != nil {
		h["len"] = len(data)
	}
	b, err := json.Marshal(h)
	require.NoError(w.t, err)
	w.wmu.Lock()
	defer w.wmu.Unlock()
	to := w.in
	if h["op"] == "exec" && w.cells != nil {
		to = w.cells
	}
	_, err = to.Write(append(append(b, '\n'), data...))
	require.NoError(w.t, err)
}

// exec sends a cell and returns its number.
func (w *worker) exec(code string) int {
	w.cell++
	w.send(map[string]any{"op": "exec", "cell": w.cell, "code": code, "fence": fmt.Sprintf("<F%d>", w.cell)}, nil)
	return w.cell
}

// run runs a cell and returns its done frame.
func (w *worker) run(code string, d time.Duration) frame {
	w.t.Helper()
	cell := w.exec(code)
	done, _ := w.until("done", d, func(f frame) bool { return f.num("cell") == int64(cell) })
	return done
}

// healthy checks that the session still runs a cell.
func (w *worker) healthy() {
	w.t.Helper()
	done := w.run("1+1", 20*time.Second)
	require.Equal(w.t, "ok", done.str("status"), "1+1: %s", done.line)
	assert.Equal(w.t, "2", done.str("value"))
}

// noThreadsLeft is Python that makes every thread's start fail, as in a
// cell that took every thread the limit allows, once the worker's own
// threads are up; threadsBack (indented, for a finally clause) undoes it.
const (
	noThreadsLeft = "import threading, time\n" +
		"for _ in range(1000):\n" +
		"    if {'replhub-reader', 'replhub-output'} <= {t.name for t in threading.enumerate()}:\n        break\n" +
		"    time.sleep(0.01)\n" +
		"saved = {n: getattr(threading, n) for n in ('_start_new_thread', '_start_joinable_thread') if hasattr(threading, n)}\n" +
		"def none_left(*a, **k):\n    raise RuntimeError(\"can't start new thread\")\n" +
		"for n in saved:\n    setattr(threading, n, none_left)\n"
	threadsBack = "    for n, f in saved.items():\n        setattr(threading, n, f)\n"
)

// waitFile waits until path exists.
func waitFile(t *testing.T, path string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s did not appear in %s", path, d)
}

// pyStr is s as a Python string literal.
func pyStr(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestInterruptAnswers(t *testing.T) {
	eachPython(t, func(t *testing.T, py string) { eachMode(t, py, interruptAnswers) })
}

func interruptAnswers(t *testing.T, w *worker) {
	// Idle: nothing to interrupt. (A hub never interrupts a cell it
	// has not sent; a worker with a cell pipe takes a later one for a
	// frame still on its way, TestCellPipe.)
	idle := 7
	if w.cells != nil {
		w.run("1", 10*time.Second)
		idle = w.cell
	}
	w.send(map[string]any{"op": "interrupt", "cell": idle}, nil)
	f := w.read(5 * time.Second)
	assert.Equal(t, "interrupted", f.op())
	assert.EqualValues(t, idle, f.num("cell"))
	assert.Equal(t, "none", f.str("how"))

	// Running: delivered, and the cell ends with KeyboardInterrupt.
	started := filepath.Join(w.dir, "started")
	cell := w.exec(fmt.Sprintf("import time\nopen(%s, 'w').close()\ntime.sleep(30)", pyStr(started)))
	waitFile(t, started, 10*time.Second)
	t0 := time.Now()
	w.send(map[string]any{"op": "interrupt", "cell": cell}, nil)
	f = w.read(5 * time.Second)
	assert.Equal(t, "interrupted", f.op(), "the answer comes before the done frame")
	assert.Equal(t, "delivered", f.str("how"))
	done, _ := w.until("done", 5*time.Second, nil)
	assert.EqualValues(t, cell, done.num("cell"))
	assert.Equal(t, "error", done.str("status"))
	assert.Equal(t, "KeyboardInterrupt", done.errType())
	assert.Less(t, time.Since(t0), 5*time.Second)

	// Interrupting a cell that has finished: none.
	w.send(map[string]any{"op": "interrupt", "cell": cell}, nil)
	f = w.read(5 * time.Second)
	assert.Equal(t, "none", f.str("how"))

	// interruptBy runs code, a cell that makes the file started and then
	// sleeps, interrupts it, and asks for its end within 5 s.
	interruptBy := func(what, code string) {
		t.Helper()
		require.NoError(t, os.Remove(started))
		cell := w.exec(fmt.Sprintf(code, pyStr(started)))
		waitFile(t, started, 10*time.Second)
		t0 := time.Now()
		w.send(map[string]any{"op": "interrupt", "cell": cell}, nil)
		f := w.read(5 * time.Second)
		assert.Equal(t, "delivered", f.str("how"), what)
		done, _ := w.until("done", 5*time.Second, nil)
		assert.EqualValues(t, cell, done.num("cell"), what)
		assert.Equal(t, "KeyboardInterrupt", done.errType(), what)
		assert.Less(t, time.Since(t0), 5*time.Second, what)
	}
	// A SIGINT that is lost (one that lands between the release of the
	// interpreter lock and the start of a blocking call, on a busy
	// machine; here a handler of the cell's takes it and puts the
	// worker's back) is sent again: the cell ends at once, not after
	// its sleep. The cell sleeps in short naps: the first SIGINT, which
	// the cell's handler is to hear, may itself land in that window on
	// a busy machine, and would then wait for a long sleep's end before
	// the handler ran (and the worker's, which a handler of the user's
	// holds off, is not sent again).
	lost := "import signal, time\nours = signal.getsignal(signal.SIGINT)\n" +
		"def lost(*a):\n    signal.signal(signal.SIGINT, ours)\nsignal.signal(signal.SIGINT, lost)\n" +
		"open(%s, 'w').close()\nfor _ in range(3000):\n    time.sleep(0.01)"
	interruptBy("a lost SIGINT", lost)

	// No thread to spare for sending it again (here the cell makes every
	// thread's start fail, once the last cell's sender is gone): the first
	// SIGINT goes alone, and the worker still sends the next interrupt's
	// again (a thread that did not start once left that undone for good).
	// The cell sleeps in short naps, which a SIGINT that lands before
	// one begins ends all the same.
	interruptBy("no thread to spare", "import threading, time\n"+
		"for _ in range(1000):\n"+
		"    if not any(t.name == 'replhub-sigint' for t in threading.enumerate()):\n        break\n"+
		"    time.sleep(0.01)\n"+
		"else:\n    raise RuntimeError('the last cell\\'s sender is still there')\n"+
		noThreadsLeft+
		"try:\n    open(%s, 'w').close()\n    for _ in range(3000):\n        time.sleep(0.01)\n"+
		"finally:\n"+threadsBack)
	interruptBy("a lost SIGINT after a thread that did not start", lost)

	// A cell whose code has ended, while its done frame is made (here
	// a flush of the user's that takes a while): none, after the done
	// frame, which the hub takes first. Before, the answer went first,
	// and the hub ended the cell as lost.
	w.run(fmt.Sprintf("import sys, time\nclass Slow:\n    def __init__(s, o): s.o = o\n    def write(s, t): return s.o.write(t)\n"+
		"    def flush(s):\n        open(%s, 'w').close(); time.sleep(0.5)\nsys.stdout = Slow(sys.stdout)", pyStr(started)), 20*time.Second)
	require.NoError(t, os.Remove(started))
	cell = w.exec("y = 2")
	waitFile(t, started, 10*time.Second)
	w.send(map[string]any{"op": "interrupt", "cell": cell}, nil)
	f = w.read(5 * time.Second)
	require.Equal(t, "done", f.op(), "%s", f.line)
	assert.EqualValues(t, cell, f.num("cell"))
	assert.Equal(t, "ok", f.str("status"), "%s", f.line)
	f = w.read(5 * time.Second)
	assert.Equal(t, "interrupted", f.op())
	assert.EqualValues(t, cell, f.num("cell"))
	assert.Equal(t, "none", f.str("how"))
	w.run("sys.stdout = sys.stdout.o", 20*time.Second)

	// Parsing: a cell of a few MB takes a while to parse; an interrupt
	// sent right after it is parked, and the cell ends without running.
	// (A worker with a cell pipe has taken the cell by then, and parses it
	// whole: a smaller one takes long enough.)
	ran := filepath.Join(w.dir, "ran")
	items := 1_500_000
	if w.cells != nil {
		items = 100_000
	}
	code := fmt.Sprintf("open(%s, 'w').close()\nx = [%s]\n", pyStr(ran), strings.Repeat("1,", items))
	cell = w.exec(code)
	w.send(map[string]any{"op": "interrupt", "cell": cell}, nil)
	f = w.read(30 * time.Second)
	assert.Equal(t, "interrupted", f.op())
	assert.Equal(t, "parked", f.str("how"))
	done, _ = w.until("done", 60*time.Second, nil)
	assert.EqualValues(t, cell, done.num("cell"))
	assert.Equal(t, "KeyboardInterrupt", done.errType(), "%s", done.line)
	assert.NoFileExists(t, ran, "the cell's code did not run")

	// Queued behind a running cell: parked too.
	cell = w.exec(fmt.Sprintf("import time\nopen(%s, 'w').close()\ntime.sleep(0.3)", pyStr(started+"2")))
	queued := w.exec(fmt.Sprintf("open(%s, 'w').close()", pyStr(ran)))
	waitFile(t, started+"2", 10*time.Second)
	w.send(map[string]any{"op": "interrupt", "cell": queued}, nil)
	f = w.read(5 * time.Second)
	assert.Equal(t, "parked", f.str("how"))
	done, _ = w.until("done", 10*time.Second, func(f frame) bool { return f.num("cell") == int64(queued) })
	assert.Equal(t, "KeyboardInterrupt", done.errType())
	assert.NoFileExists(t, ran)

	// Python's default handler, set by a cell, gives way to ours at the
	// next cell; a handler of the user's own stays.
	w.run("import signal\nsignal.signal(signal.SIGINT, signal.default_int_handler)", 10*time.Second)
	done = w.run("signal.getsignal(signal.SIGINT) is signal.default_int_handler", 10*time.Second)
	assert.Equal(t, "False", done.str("value"))
	w.run("def mine(n, f): pass\nsignal.signal(signal.SIGINT, mine)", 10*time.Second)
	done = w.run("signal.getsignal(signal.SIGINT) is mine", 10*time.Second)
	assert.Equal(t, "True", done.str("value"))

	w.healthy()
}

// Interrupts fired at random moments at cells that send big frames never
// tear one: every header parses, every payload is whole.
func TestFramesNeverTorn(t *testing.T) {
	eachPython(t, func(t *testing.T, py string) {
		w := startWorker(t, py)
		blobFile := filepath.Join(w.dir, "blob")
		require.NoError(t, os.WriteFile(blobFile, bytes.Repeat([]byte("y"), 300_000), 0o600))
		// Load the toolkit (its Link is how a cell reaches the channel).
		cell := w.exec("sessions()")
		req, _ := w.until("req", 10*time.Second, nil)
		w.send(map[string]any{"op": "reply", "id": req.num("id"), "ok": true, "sessions": []any{}}, nil)
		done, _ := w.until("done", 10*time.Second, nil)
		require.Equal(t, "ok", done.str("status"), "%s", done.line)
		require.EqualValues(t, cell, done.num("cell"))
		w.run(fmt.Sprintf("import replhub_toolkit.relay as _t\n_B = b'x' * 300000\n_F = open(%s, 'rb')", pyStr(blobFile)), 10*time.Second)

		// Some 300 to 700 interrupts are sent, and 10 to 20 of these cells
		// end interrupted (most interrupts fall between cells or past
		// the end of one), under every Python.
		const cells = 80
		code := "for i in range(3):\n" +
			"    _t._link.chan.send({'op': 'blob', 'i': i}, _B)\n" +
			"    _t._link.chan.send_file({'op': 'blob', 'i': i}, _F, 0, 300000)\n" +
			"'v' * 9000"
		var current sync.Map
		stop := make(chan struct{})
		fired := make(chan int, 1)
		go func() {
			n := 0
			defer func() { fired <- n }()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-time.After(time.Duration(i%7) * 300 * time.Microsecond):
				}
				if c, ok := current.Load("cell"); ok {
					w.send(map[string]any{"op": "interrupt", "cell": c}, nil)
					n++
				}
			}
		}()
		var blobs, interrupted, ok int
		for i := 0; i < cells; i++ {
			cell := w.exec(code)
			current.Store("cell", cell)
			for {
				f := w.read(20 * time.Second)
				switch f.op() {
				case "blob":
					blobs++
					require.Len(t, f.data, 300_000)
					require.True(t, bytes.Count(f.data, f.data[:1]) == len(f.data) && (f.data[0] == 'x' || f.data[0] == 'y'), "a whole payload")
					continue
				case "interrupted":
					continue
				case "done":
				default:
					t.Fatalf("unexpected frame %s", f.line)
				}
				require.EqualValues(t, cell, f.num("cell"), "%s", f.line)
				if f.str("status") == "ok" {
					ok++
					require.Len(t, f.str("value"), 9002)
				} else {
					require.Equal(t, "KeyboardInterrupt", f.errType(), "%s", f.line)
					interrupted++
				}
				break
			}
		}
		close(stop)
		n := <-fired
		// Answers to the last interrupts, then a clean cell.
		current.Delete("cell")
		time.Sleep(50 * time.Millisecond)
		cell = w.exec("1+1")
		done, _ = w.until("done", 20*time.Second, func(f frame) bool { return f.num("cell") == int64(cell) })
		assert.Equal(t, "2", done.str("value"))
		t.Logf("%d cells: %d ok, %d interrupted; %d interrupts sent, %d payloads", cells, ok, interrupted, n, blobs)
		assert.Positive(t, interrupted, "some cells were interrupted")
	})
}

func TestCancel(t *testing.T) {
	eachPython(t, func(t *testing.T, py string) { eachMode(t, py, cancel) })
}

func cancel(t *testing.T, w *worker) {
	py := w.cmd.Path
	pyVersion := w.ready.str("python")
	pyVersion = pyVersion[:strings.LastIndexByte(pyVersion, '.')]

	// A pull of a big file, cancelled mid-way: no ack comes, so the
	// worker waits with its window full, and cancel ends it there.
	big := filepath.Join(w.dir, "big.bin")
	f, err := os.Create(big)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(200<<20))
	f.Close()
	w.send(map[string]any{"op": "serve", "sid": 1, "kind": "read", "from": "t", "path": big}, nil)
	first := w.read(10 * time.Second)
	require.Equal(t, "served", first.op(), "%s", first.line)
	require.Equal(t, true, first.h["first"])
	require.EqualValues(t, 200<<20, first.num("size"))
	chunk := w.read(10 * time.Second)
	require.Equal(t, "chunk", chunk.op())
	w.send(map[string]any{"op": "cancel", "sid": 1}, nil)
	last, before := w.until("served", 10*time.Second, nil)
	for _, f := range before {
		assert.Equal(t, "chunk", f.op())
	}
	assert.Less(t, len(before), 8, "it stopped between chunks")
	assert.Equal(t, false, last.h["ok"])
	assert.Equal(t, "cancelled", last.str("error"))
	assert.EqualValues(t, 1, last.num("sid"))
	assert.Equal(t, pyVersion, last.str("py"))
	w.healthy()

	// A push cancelled after its first chunk leaves no part file.
	dest := filepath.Join(w.dir, "out.bin")
	w.send(map[string]any{"op": "serve", "sid": 2, "kind": "write", "from": "t", "path": dest, "size": 3 << 20, "mode": 0o644}, nil)
	first = w.read(10 * time.Second)
	require.Equal(t, "served", first.op(), "%s", first.line)
	require.Equal(t, true, first.h["ok"])
	w.send(map[string]any{"op": "chunk", "sid": 2, "seq": 0}, bytes.Repeat([]byte("z"), 1<<20))
	ack := w.read(10 * time.Second)
	require.Equal(t, "ack", ack.op(), "%s", ack.line)
	assert.FileExists(t, dest+".replhub-part")
	w.send(map[string]any{"op": "cancel", "sid": 2}, nil)
	last = w.read(10 * time.Second)
	assert.Equal(t, "served", last.op())
	assert.Equal(t, false, last.h["ok"])
	assert.Equal(t, "cancelled", last.str("error"))
	assert.NoFileExists(t, dest+".replhub-part")
	assert.NoFileExists(t, dest)
	w.healthy()

	// A serve queued behind a running cell is dropped and answered at once.
	started := filepath.Join(w.dir, "started")
	cell := w.exec(fmt.Sprintf("import time\nopen(%s, 'w').close()\ntime.sleep(30)", pyStr(started)))
	waitFile(t, started, 10*time.Second)
	w.send(map[string]any{"op": "serve", "sid": 3, "kind": "get", "from": "t", "py": pyVersion, "names": []string{"x"}}, nil)
	t0 := time.Now()
	w.send(map[string]any{"op": "cancel", "sid": 3}, nil)
	last = w.read(5 * time.Second)
	assert.Equal(t, "served", last.op())
	assert.EqualValues(t, 3, last.num("sid"))
	assert.Equal(t, false, last.h["ok"])
	assert.Equal(t, "cancelled", last.str("error"))
	assert.Less(t, time.Since(t0), 2*time.Second)
	w.send(map[string]any{"op": "interrupt", "cell": cell}, nil)
	f2, _ := w.until("done", 10*time.Second, nil)
	assert.Equal(t, "KeyboardInterrupt", f2.errType())

	// A call running time.sleep(30) ends at a cancel.
	napping := filepath.Join(w.dir, "napping")
	w.run(fmt.Sprintf("def nap():\n    import time\n    open(%s, 'w').close()\n    time.sleep(30)", pyStr(napping)), 10*time.Second)
	blob, err := exec.Command(py, "-c", "import pickle, sys; sys.stdout.buffer.write(pickle.dumps(('name', 'nap', (), {}), 2))").Output()
	require.NoError(t, err)
	w.send(map[string]any{"op": "serve", "sid": 4, "kind": "call", "from": "t", "py": pyVersion}, blob)
	waitFile(t, napping, 10*time.Second)
	t0 = time.Now()
	w.send(map[string]any{"op": "cancel", "sid": 4}, nil)
	last = w.read(5 * time.Second)
	assert.Equal(t, "served", last.op())
	assert.EqualValues(t, 4, last.num("sid"))
	assert.Equal(t, false, last.h["ok"])
	assert.Contains(t, last.str("error"), "KeyboardInterrupt")
	assert.Less(t, time.Since(t0), 3*time.Second)
	w.healthy()
}

// What kills a naive REPL loop (a recursion or memory error in the parser,
// megabytes of text in a value or an error) ends the cell, not the session,
// and no header line the worker sends reaches the hub's bound.
func TestSessionSurvives(t *testing.T) {
	cells := []struct{ name, code, errType string }{
		{"eval of a deep sum", `eval("1+"*3000+"1")`, "*"},
		{"a deep sum as source", strings.Repeat("1+", 100_000) + "1", "*"},
		{"deep parentheses", strings.Repeat("(", 200_000), "?"},
		{"deep unary minus", strings.Repeat("-", 100_000) + "1", "MemoryError"},
		{"a 9 MB KeyError", `d = {}; d["k"*9_000_000]`, "KeyError"},
		{"a value of repr 50 MB", `"x"*50_000_000`, ""},
		{"a 3 MB exception message", `raise ValueError("\x01" * 3_000_000)`, "ValueError"},
		{"long names", `globals()["n"*200] = 1; globals()["é"*100] = 2; globals()[1] = 3; import sys; sys.exit("x" * 1_000_000)`, "SystemExit"},
		{"deep recursion", "def f(n):\n    return f(n+1)\nf(0)", "RecursionError"},
		{"an error while printing the error", "class E(Exception):\n    def __str__(self):\n        raise RuntimeError('no')\nraise E()", "E"},
	}
	eachPython(t, func(t *testing.T, py string) {
		w := startWorker(t, py)
		var names []any // as the hub has them: a done frame sends them when they change
		for _, c := range cells {
			done := w.run(c.code, 60*time.Second)
			if n, ok := done.h["names"].([]any); ok {
				names = n
			}
			assert.Less(t, len(done.line), maxHeader, c.name)
			switch c.errType {
			case "*": // it depends on the Python: a value or RecursionError
			case "":
				assert.Equal(t, "ok", done.str("status"), "%s: %.300s", c.name, done.line)
				assert.LessOrEqual(t, len([]rune(done.str("value"))), 10100, c.name)
			case "?":
				assert.Equal(t, "error", done.str("status"), "%s: %.300s", c.name, done.line)
			default:
				assert.Equal(t, c.errType, done.errType(), "%s: %.300s", c.name, done.line)
			}
			w.healthy()
		}
		require.NotEmpty(t, names)
		for _, n := range names {
			assert.LessOrEqual(t, len([]rune(n.(string))), 100)
		}
	})
}

// alive says whether pid runs (a zombie does not).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// groupMembers lists the live processes of process group pgid.
func groupMembers(pgid int) []int {
	var pids []int
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		var state string
		var pid, ppid, pg int
		fmt.Sscanf(s[:strings.IndexByte(s, ' ')], "%d", &pid)
		if _, err := fmt.Sscanf(s[i+2:], "%s %d %d", &state, &ppid, &pg); err != nil || state == "Z" {
			continue
		}
		if pg == pgid {
			pids = append(pids, pid)
		}
	}
	return pids
}

func waitGone(t *testing.T, what string, d time.Duration, gone func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if gone() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("%s still there after %s", what, d)
}

// A worker that dies, however it dies, takes its process group with it,
// and the hub still sees its frame stream end.
func TestReaperEndsTheGroup(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	deaths := map[string]func(w *worker){
		"os._exit": func(w *worker) { w.exec("import os\nos._exit(3)") },
		"SIGKILL":  func(w *worker) { syscall.Kill(w.cmd.Process.Pid, syscall.SIGKILL) },
	}
	eachPython(t, func(t *testing.T, py string) {
		for name, die := range deaths {
			t.Run(name, func(t *testing.T) {
				w := startWorker(t, py)
				pidFile := filepath.Join(w.dir, "sleep.pid")
				done := w.run(fmt.Sprintf("import subprocess\np = subprocess.Popen(['sleep', '300'])\nopen(%s, 'w').write(str(p.pid))", pyStr(pidFile)), 10*time.Second)
				require.Equal(t, "ok", done.str("status"), "%s", done.line)
				b, err := os.ReadFile(pidFile)
				require.NoError(t, err)
				var sleepPid int
				fmt.Sscanf(string(b), "%d", &sleepPid)
				require.True(t, alive(sleepPid))
				pgid := w.cmd.Process.Pid
				require.GreaterOrEqual(t, len(groupMembers(pgid)), 3, "worker, reaper and sleep")
				// Where Python can spawn it, the reaper is a small sh, not a
				// fork of the worker (whose memory a fork write-protects).
				// Looked at until it is seen (at most 2 s): a process between
				// its fork and its exec, or one that has exited and is not
				// reaped yet, reads as neither for a moment.
				spawn := canSpawn(t, py)
				var shReapers, forks int
				var seen, first []string // for a failure's message
				found := false
				for try := 0; try < 100 && !found; try++ {
					if try == 1 {
						first = seen
					}
					if try > 0 {
						time.Sleep(20 * time.Millisecond)
					}
					shReapers, forks, seen = 0, 0, nil
					for _, p := range groupMembers(pgid) {
						b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
						st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
						seen = append(seen, fmt.Sprintf("%d %.60q %.40q", p, b, st))
						if strings.Contains(string(b), "replhub-reaper") {
							shReapers++
						} else if p != pgid && strings.Contains(string(b), w.cmd.Args[1]) {
							forks++
						}
					}
					found = (spawn && shReapers >= 1 && forks == 0) || (!spawn && shReapers == 0 && forks == 1)
				}
				assert.True(t, found, "%d sh reapers and %d forks of the worker (sh spawned: %v): %q (first look: %q)", shReapers, forks, spawn, seen, first)
				die(w)
				waitGone(t, "the sleep", 2*time.Second, func() bool { return !alive(sleepPid) })
				waitGone(t, "the group", 2*time.Second, func() bool { return len(groupMembers(pgid)) == 0 })
				// The frame stream ends: the reaper holds none of its pipes.
				deadline := time.After(2 * time.Second)
				for {
					select {
					case f, ok := <-w.frames:
						if ok && f.err == nil {
							continue
						}
					case <-deadline:
						t.Fatal("the frame stream did not end")
					}
					break
				}
			})
		}
	})
}

// What a dying worker's pump had no time to pass on, its reaper does:
// what waits in its stdout pipe as a run of stdout (between the session's
// markers), what waits in stderr's as it is. The worker is stopped while
// the test writes into its pipes, so its pump cannot take them first.
func TestReaperPassesLastWords(t *testing.T) {
	eachPython(t, func(t *testing.T, py string) {
		w := startWorker(t, py)
		w.healthy()
		pid := w.cmd.Process.Pid
		require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
		// kill returns before the threads stop: a pump still running
		// would take the words, and die with them unwritten.
		waitGone(t, "a running thread", 5*time.Second, func() bool { return allStopped(pid) })
		for fd, text := range map[int]string{1: "last on stdout\n", 2: "last on stderr\n"} {
			f, err := os.OpenFile(fmt.Sprintf("/proc/%d/fd/%d", pid, fd), os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = f.WriteString(text)
			f.Close()
			require.NoError(t, err)
		}
		require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
		waitGone(t, "the group", 5*time.Second, func() bool { return len(groupMembers(pid)) == 0 })
		// os/exec copies the output stream into w.out on a goroutine.
		var got texts
		require.Eventually(t, func() bool {
			got = split(w.ready.str("streams"), []byte(w.out.String()))
			return strings.Contains(got.all, "last on stdout") && strings.Contains(got.all, "last on stderr")
		}, 10*time.Second, 10*time.Millisecond, "the last words reach the output stream")
		assert.Contains(t, got.stdout, "last on stdout\n")
		assert.Contains(t, got.stderr, "last on stderr\n")
		assert.NotContains(t, got.stderr, "last on stdout")
		assert.NotContains(t, got.stdout, "last on stderr")
	})
}

// allStopped tells whether every thread of pid is stopped (SIGSTOP).
func allStopped(pid int) bool {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
	for _, task := range tasks {
		tid, err := strconv.Atoi(filepath.Base(task))
		if err != nil {
			return false
		}
		if state, _, ok := procstat.Stat(tid); !ok || state != 'T' {
			return false
		}
	}
	return len(tasks) > 0
}

// canSpawn tells whether py has os.posix_spawn (3.8+ on Linux).
func canSpawn(t *testing.T, py string) bool {
	out, err := exec.Command(py, "-c", "import os; print(hasattr(os, 'posix_spawn'))").Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out)) == "True"
}

// A worker that does not lead its process group (run by hand from a
// script) starts no reaper, and so never kills a group not its own.
// A worker's threads start beside its first cell, on a thread that
// threading does not know of: none of them may show up as a thread of the
// user's (a swap would wait for it), and the reaper's first child is
// reaped once they are up.
func TestWorkerThreadsStartBesideTheFirstCell(t *testing.T) {
	eachPython(t, func(t *testing.T, py string) {
		w := startWorker(t, py)
		done := w.run(`import sys, threading, os
type(sys.stdout.buffer).write.__globals__["_started"]()  # the worker's, run as a script
try:
    kids = os.waitpid(-1, os.WNOHANG)
except ChildProcessError:
    kids = "no child"
(sorted((t.name, t.daemon) for t in threading.enumerate() if t is not threading.main_thread()),
 threading.active_count(), kids)`, 20*time.Second)
		require.Equal(t, "ok", done.str("status"), "%s", done.line)
		v := done.str("value")
		assert.Equal(t, "([('replhub-output', True), ('replhub-reader', True)], 3, 'no child')", v,
			"only the worker's named threads, daemons; the reaper's first child reaped")
	})
}

func TestNoReaperOutsideItsGroup(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	var py string
	for _, p := range pythons(t) {
		py = p
		break
	}
	dir := t.TempDir()
	path, err := Install(dir)
	require.NoError(t, err)
	cmd := exec.Command(py, path, "--stdio")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer cmd.Wait()
	defer stdin.Close()
	r := bufio.NewReader(stdout)
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	require.Contains(t, line, `"op":"ready"`)
	_, err = io.WriteString(stdin, `{"op":"exec","cell":1,"code":"1","fence":"F"}`+"\n")
	require.NoError(t, err)
	line, err = r.ReadString('\n')
	require.NoError(t, err)
	require.Contains(t, line, `"op":"done"`)
	// A reaper is a fork of the worker, which runs the same command line,
	// or a sh named replhub-reaper.
	var forks []int
	for _, p := range groupMembers(syscall.Getpgrp()) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		if strings.Contains(string(b), path) || strings.Contains(string(b), "replhub-reaper") {
			forks = append(forks, p)
		}
	}
	assert.Equal(t, []int{cmd.Process.Pid}, forks, "the worker alone")
}
