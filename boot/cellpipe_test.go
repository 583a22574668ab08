package boot

import (
	"fmt"
	"io"
	"net"
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
)

// A worker started with --cells reads its exec frames off a pipe of
// their own, on its main thread while idle, and the rest on stdin; what
// can come between the two still comes out right.
func TestCellPipe(t *testing.T) {
	eachPython(t, func(t *testing.T, py string) {
		w := startWorkerCells(t, py)
		assert.Equal(t, true, w.ready.h["cells"], "%s", w.ready.line)
		w.healthy()

		// A frame the reader queues (here one the worker does not know)
		// wakes the main thread, which waits on the cell pipe.
		unknown := func(id int) {
			t.Helper()
			w.send(map[string]any{"op": "bogus", "id": id}, nil)
			f := w.read(5 * time.Second)
			require.Equal(t, "error", f.op(), "%s", f.line)
			assert.Contains(t, f.str("error"), "unknown op")
			assert.EqualValues(t, id, f.num("id"))
		}
		unknown(1)
		w.healthy()

		// An interrupt that overtakes its cell's exec frame on the other
		// pipe parks the cell: it ends with KeyboardInterrupt, unrun.
		ran := filepath.Join(w.dir, "ran")
		next := w.cell + 1
		w.send(map[string]any{"op": "interrupt", "cell": next}, nil)
		f := w.read(5 * time.Second)
		require.Equal(t, "interrupted", f.op(), "%s", f.line)
		assert.Equal(t, "parked", f.str("how"))
		done := w.run(fmt.Sprintf("open(%s, 'w').close()", pyStr(ran)), 10*time.Second)
		assert.EqualValues(t, next, done.num("cell"))
		assert.Equal(t, "KeyboardInterrupt", done.errType(), "%s", done.line)
		assert.NoFileExists(t, ran)
		w.healthy()

		// Half an exec frame, then a frame on stdin: that one is answered,
		// and the cell runs once the rest of its frame comes.
		w.cell++
		line := fmt.Sprintf(`{"op":"exec","cell":%d,"code":"6*7","fence":"<F%d>"}`+"\n", w.cell, w.cell)
		_, err := w.cells.Write([]byte(line[:20]))
		require.NoError(t, err)
		time.Sleep(50 * time.Millisecond)
		unknown(2)
		_, err = w.cells.Write([]byte(line[20:]))
		require.NoError(t, err)
		done, _ = w.until("done", 10*time.Second, nil)
		assert.EqualValues(t, w.cell, done.num("cell"))
		assert.Equal(t, "42", done.str("value"))

		// A line that is no frame is answered with an error; the pipe
		// goes on.
		_, err = w.cells.Write([]byte("not a frame\n"))
		require.NoError(t, err)
		f = w.read(5 * time.Second)
		require.Equal(t, "error", f.op(), "%s", f.line)
		assert.Contains(t, f.str("error"), "malformed frame")
		w.healthy()

		// No child inherits the cell pipe: the worker holds it on a
		// descriptor of its own, close-on-exec, and not on fd 3.
		st, err := w.cells.(*os.File).Stat()
		require.NoError(t, err)
		ino := st.Sys().(*syscall.Stat_t).Ino
		done = w.run(fmt.Sprintf("import os\ndef link(fd):\n    try:\n        return os.readlink('/proc/self/fd/' + fd)\n    except OSError:\n        pass\n"+
			"fds = [int(fd) for fd in os.listdir('/proc/self/fd') if link(fd) == 'pipe:[%d]']\n"+
			"(len(fds), 3 in fds, [os.get_inheritable(fd) for fd in fds])", ino), 10*time.Second)
		assert.Equal(t, "(1, False, [False])", done.str("value"), "%s", done.line)

		// The tasks of a cell that awaited run on between cells, and an
		// exec frame stops the loop that runs them (3.8 on: top-level
		// await).
		if v := w.ready.str("python"); !strings.HasPrefix(v, "3.6.") && !strings.HasPrefix(v, "3.7.") {
			w.run("import asyncio\nn = 0\nasync def tick():\n    global n\n    while True:\n        n += 1\n        await asyncio.sleep(0.01)\n"+
				"t = asyncio.ensure_future(tick())\nawait asyncio.sleep(0)", 10*time.Second)
			time.Sleep(300 * time.Millisecond)
			t0 := time.Now()
			done = w.run("n", 10*time.Second)
			assert.Less(t, time.Since(t0), 2*time.Second)
			n, err := strconv.Atoi(done.str("value"))
			require.NoError(t, err, "%s", done.line)
			assert.GreaterOrEqual(t, n, 5, "the task ran between cells")
			unknown(3)
			w.healthy()
		}

		// A loop that cannot watch a pipe (here one whose add_reader
		// says so) gets the cell pipe read by a thread of its own.
		if v := w.ready.str("python"); !strings.HasPrefix(v, "3.6.") && !strings.HasPrefix(v, "3.7.") {
			w2 := startWorkerCells(t, py)
			w2.run("import asyncio, threading\nclass L(asyncio.SelectorEventLoop):\n    def add_reader(self, *a):\n        raise NotImplementedError\n"+
				"class P(asyncio.DefaultEventLoopPolicy):\n    def new_event_loop(self):\n        return L()\n"+
				"asyncio.set_event_loop_policy(P())", 10*time.Second)
			w2.run("await asyncio.sleep(0)", 10*time.Second)
			done = w2.run("sorted(t.name for t in threading.enumerate() if t.name.startswith('replhub-cells'))", 10*time.Second)
			assert.Equal(t, "['replhub-cells']", done.str("value"), "%s", done.line)
			w2.healthy()
		}

		// Nor a thread to spare for it (here thread starts fail once the
		// worker's own threads are up): the loop looks at the pipe itself,
		// and the next cells run.
		if v := w.ready.str("python"); !strings.HasPrefix(v, "3.6.") && !strings.HasPrefix(v, "3.7.") {
			w3 := startWorkerCells(t, py)
			w3.run("import asyncio\nclass L(asyncio.SelectorEventLoop):\n    def add_reader(self, *a):\n        raise NotImplementedError\n"+
				"class P(asyncio.DefaultEventLoopPolicy):\n    def new_event_loop(self):\n        return L()\n"+
				"asyncio.set_event_loop_policy(P())\n"+noThreadsLeft, 10*time.Second)
			w3.run("await asyncio.sleep(0)", 10*time.Second)
			for i := 0; i < 3; i++ {
				t0 := time.Now()
				done = w3.run("sorted(t.name for t in threading.enumerate() if t.name.startswith('replhub-cells'))", 10*time.Second)
				assert.Equal(t, "[]", done.str("value"), "%s", done.line)
				assert.Less(t, time.Since(t0), 2*time.Second)
			}
			w3.healthy()
		}

		// A signal handler of the user's that raises while the main thread
		// waits on the pipe (a timeout's alarm left set) ends no more than
		// that wait: the pipe stays, and takes the next cells.
		before := w.run(cellsRead, 10*time.Second).str("value")
		w.run("import signal\ndef boom(*a):\n    raise TimeoutError()\nsignal.signal(signal.SIGALRM, boom)\nsignal.setitimer(signal.ITIMER_REAL, 0.2)", 10*time.Second)
		time.Sleep(500 * time.Millisecond)
		w.healthy()
		after := w.run(cellsRead, 10*time.Second).str("value")
		assert.NotEqual(t, before, after, "the cells still come on their pipe")

		// Once the cell pipe ends (a hub that adopted the worker sends
		// exec frames on its own link), stdin's exec frames run.
		require.NoError(t, w.cells.Close())
		w.cells = nil
		w.healthy()
		unknown(4)
	})
}

// cellsRead is a cell whose value counts the frames its worker took off
// the cell pipe, and says whether it reads one.
const cellsRead = `[(o.cells is not None, o.cells_read) for o in __import__("gc").get_objects() if type(o).__name__ == "Session" and hasattr(o, "cells_read")][0]`

// What the cell pipe holds when a frame on stdin asks for the main thread's
// state is taken first: an exec frame the hub sent before a query or an
// adopt is the cell they wait for, or say runs, as on one pipe. Here the
// main thread cannot read the pipe meanwhile: a task of a cell that
// awaited holds it in a step that sleeps. (3.8 on: top-level await.)
func TestCellPipeComesFirst(t *testing.T) {
	eachPython(t, func(t *testing.T, py string) {
		sock := filepath.Join(t.TempDir(), "w.sock")
		w := startWorkerCells(t, py, "--durable", sock)
		if v := w.ready.str("python"); strings.HasPrefix(v, "3.6.") || strings.HasPrefix(v, "3.7.") {
			t.Skip("no top-level await before 3.8")
		}
		hog := "import asyncio, time\nasync def hog():\n    await asyncio.sleep(0.2)\n    time.sleep(1.5)\nt = asyncio.ensure_future(hog())\nawait asyncio.sleep(0)"

		w.run(hog, 10*time.Second)
		time.Sleep(500 * time.Millisecond) // the step sleeps
		cell := w.exec("6 * 7")
		a := w.ask(map[string]any{"kind": "vars", "wait": 0})
		assert.Equal(t, true, a.h["busy"], "the query sees the cell: %s", a.line)
		assert.EqualValues(t, cell, a.num("cell"))
		done, _ := w.until("done", 10*time.Second, func(f frame) bool { return f.num("cell") == int64(cell) })
		assert.Equal(t, "42", done.str("value"))

		w.run(hog, 10*time.Second)
		time.Sleep(500 * time.Millisecond)
		cell = w.exec("7 * 6")
		next := adoptOn(t, sock)
		h, _ := next.next()
		require.Equal(t, "ready", h["op"])
		assert.EqualValues(t, cell, h["cell"], "the new hub hears of the cell: %v", h)
		assert.Equal(t, true, h["running"])
		for i := 0; i < 100; i++ {
			h, _ = next.next()
			if n, _ := h["cell"].(float64); h["op"] == "done" && int(n) == cell {
				break // the last done frame comes again first
			}
		}
		assert.Equal(t, "done", h["op"], "%v", h)
		assert.EqualValues(t, cell, h["cell"])
		assert.Equal(t, "42", h["value"])
	})
}

// _CellPipe gives back the frames written, however the pipe cuts them,
// read without blocking as the worker reads it, and drops a line that is no
// frame with a ValueError, whatever its bytes: frames with payloads, lines
// of 200 KB, garbage, in random pieces. A link that was reset ends as one
// closed.
func TestCellPipeFrames(t *testing.T) {
	eachPython(t, func(t *testing.T, py string) {
		dir := t.TempDir()
		path, err := Install(dir)
		require.NoError(t, err)
		code := `import importlib.util, json, os, random, select, sys, threading
spec = importlib.util.spec_from_file_location("w", sys.argv[1])
w = importlib.util.module_from_spec(spec); spec.loader.exec_module(w)
for seed in range(40):
    rnd = random.Random(seed)
    want, stream = [], b""
    for i in range(60):
        k = rnd.random()
        if k < 0.15:
            stream += bytes(rnd.randrange(11, 256) for _ in range(rnd.randrange(0, 50))).replace(b"\n", b"") + b"\n"
            want.append("bad")
            continue
        h = {"op": "exec", "cell": i, "code": "x" * rnd.choice([0] * 10 + [10] * 9 + [200000])}
        data = None
        if k < 0.4:
            data = bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 3000)))
            h["len"] = len(data)
        stream += json.dumps(h).encode() + b"\n" + (data or b"")
        want.append((h, data))
    r, wr = os.pipe()
    def feed():
        i = 0
        while i < len(stream):
            n = rnd.choice([1, 7, 100, 4096, 70000])
            os.write(wr, stream[i:i + n])
            i += n
        os.close(wr)
    threading.Thread(target=feed, daemon=True).start()
    cp, got, more = w._CellPipe(r), [], True
    while True:
        try:
            f = cp.take()
            if f is None:
                assert not cp.pending(), seed
                if not more:
                    select.select([r], [], [])
                more = cp.fill()
                continue
            got.append(f)
        except EOFError:
            break
        except ValueError:
            got.append("bad")
    assert len(got) == len(want), (seed, len(got), len(want))
    for g, x in zip(got, want):
        assert g == x or (g == "bad" and x == "bad"), (seed, str(g)[:200], str(x)[:200])
    os.close(r)
# A link its hub closed with our answer unread is reset: its end, as EOF.
import socket
a, b = socket.socketpair()
a.sendall(b'{"op":"cells"}\n')
b.close()
cp = w._CellPipe(a.detach())
cp.fill()
try:
    cp.take()
    raise AssertionError("no EOFError")
except EOFError:
    pass
print("ok")
`
		out, err := exec.Command(py, "-c", code, path).CombinedOutput()
		require.NoError(t, err, "%s", out)
		assert.Equal(t, "ok\n", string(out))
	})
}

// A worker told of a cell pipe that is not there (a wrapper of the user's
// closed fd 3) starts all the same, and takes its exec frames on stdin.
func TestCellPipeMissing(t *testing.T) {
	eachPython(t, func(t *testing.T, py string) {
		w := startWorkerWith(t, py, nil, false, "--cells", "3")
		assert.Nil(t, w.ready.h["cells"], "%s", w.ready.line)
		w.healthy()
		done := w.run(cellsRead, 10*time.Second)
		assert.Equal(t, "(False, 0)", done.str("value"))
	})
}

// adoptWithCells adopts the worker on sock as a hub that offers a cell
// link does, and returns the connection and the ready frame.
func adoptWithCells(t *testing.T, sock string) (*frameConn, map[string]any) {
	t.Helper()
	fc := dialWorker(t, sock, map[string]any{"op": "adopt", "cells": true})
	for i := 0; i < 100; i++ {
		if h, _ := fc.next(); h["op"] == "ready" {
			return fc, h
		}
	}
	t.Fatal("no ready frame")
	return nil, nil
}

// doneOf reads frames until cell n's done frame.
func (c *frameConn) doneOf(n int) map[string]any {
	for i := 0; i < 10000; i++ {
		h, _ := c.next()
		if cell, _ := h["cell"].(float64); h["op"] == "done" && int(cell) == n {
			return h
		}
	}
	return nil
}

// cellLink opens a cell link to sock with token; nil when the worker
// closes it unanswered.
func cellLink(t *testing.T, sock string, token any) *frameConn {
	t.Helper()
	fc := dialWorker(t, sock, map[string]any{"op": "cells", "token": token})
	line, err := fc.br.ReadBytes('\n')
	if err == io.EOF && len(line) == 0 {
		return nil
	}
	require.NoError(t, err)
	require.JSONEq(t, `{"op":"cells"}`, string(line))
	return fc
}

// A hub that adopts a local worker may offer it a cell link: the ready
// frame then gives a token, and a second connection to the worker's
// socket whose cells frame shows it is answered with one and then
// carries the exec frames, which the main thread reads while it waits,
// as it read the first hub's cell pipe; the rest, and the answers, go on
// the adopted connection. A wrong token and a token used again are closed
// unanswered; the last hub's pipe or link is let go at the adopt, what it
// held queued first, what comes on it after never read.
// A worker started without a cell pipe (as under sudo) takes one as well,
// and so does one whose event loop runs between cells (it watched no pipe
// while it had none).
func TestCellLink(t *testing.T) {
	eachPython(t, func(t *testing.T, py string) {
		for _, pipe := range []bool{true, false} {
			t.Run(map[bool]string{true: "pipe", false: "stdin"}[pipe], func(t *testing.T) {
				sock := filepath.Join(t.TempDir(), "w.sock")
				w := startWorkerWith(t, py, nil, pipe, "--durable", sock)
				loop := !strings.HasPrefix(w.ready.str("python"), "3.6.") && !strings.HasPrefix(w.ready.str("python"), "3.7.")
				if loop {
					w.run("import asyncio\nawait asyncio.sleep(0)", 10*time.Second)
				}
				w.run("x = 6", 10*time.Second)

				if pipe {
					// The first hub's pipe, still open, is let go at the
					// adopt: an exec frame on it after that is never read.
					fc, ready := adoptWithCells(t, sock)
					link := cellLink(t, sock, ready["cells_token"])
					require.NotNil(t, link, "%v", ready)
					cell := int(ready["cell"].(float64))
					// (Or it finds the pipe closed already: EPIPE.)
					fmt.Fprintf(w.cells, `{"op":"exec","cell":%d,"code":"x = 1000","fence":"<O>"}`+"\n", cell+1)
					time.Sleep(200 * time.Millisecond)
					link.send(map[string]any{"op": "exec", "cell": cell + 1, "code": "x", "fence": "<L0>"})
					done := fc.doneOf(cell + 1)
					require.NotNil(t, done)
					assert.Equal(t, "6", done["value"], "the old pipe's frame ran")
					w.cells.Close() // the first hub goes
				}
				fc, ready := adoptWithCells(t, sock)
				token, _ := ready["cells_token"].(string)
				require.Len(t, token, 32, "%v", ready)
				assert.Nil(t, cellLink(t, sock, strings.Repeat("0", 32)), "a wrong token")
				link := cellLink(t, sock, token)
				require.NotNil(t, link, "the token the ready frame gave")
				assert.Nil(t, cellLink(t, sock, token), "a token used again")

				cell := int(ready["cell"].(float64))
				for i := 1; i <= 3; i++ {
					link.send(map[string]any{"op": "exec", "cell": cell + i, "code": "x += 1\n" + cellsRead, "fence": fmt.Sprintf("<L%d>", i)})
					done := fc.doneOf(cell + i)
					require.NotNil(t, done)
					assert.Equal(t, "ok", done["status"], "%v", done)
					assert.Regexp(t, `^\(True, \d+\)$`, done["value"])
					if i == 3 {
						before := 0
						if pipe {
							before = cell
						}
						assert.Equal(t, fmt.Sprintf("(True, %d)", before+3), done["value"], "each came on a pipe or link")
					}
				}
				// An interrupt on the adopted connection reaches a cell sent on
				// the link.
				link.send(map[string]any{"op": "exec", "cell": cell + 4, "code": "import time\ntime.sleep(30)", "fence": "<L4>"})
				time.Sleep(300 * time.Millisecond)
				fc.send(map[string]any{"op": "interrupt", "cell": cell + 4})
				done := fc.doneOf(cell + 4)
				require.NotNil(t, done)
				assert.Contains(t, fmt.Sprint(done["error"]), "KeyboardInterrupt")
				link.send(map[string]any{"op": "exec", "cell": cell + 5, "code": "x", "fence": "<L5>"})
				done = fc.doneOf(cell + 5)
				require.NotNil(t, done)
				assert.Equal(t, "9", done["value"])
			})
		}
	})
}

// A loop that cannot watch a pipe has a thread of its own read the cell
// pipe; a new hub's adopt lets that pipe go while the first hub, frozen,
// still holds it open, and the thread ends all the same: one thread reads
// the new hub's link, and it takes the cells.
func TestCellLinkReadByAThread(t *testing.T) {
	eachPython(t, func(t *testing.T, py string) {
		sock := filepath.Join(t.TempDir(), "w.sock")
		w := startWorkerWith(t, py, nil, true, "--durable", sock)
		if v := w.ready.str("python"); strings.HasPrefix(v, "3.6.") || strings.HasPrefix(v, "3.7.") {
			t.Skip("no top-level await")
		}
		threads := "sorted(t.name for t in __import__('threading').enumerate() if t.name.startswith('replhub-cells'))"
		w.run("import asyncio\nclass L(asyncio.SelectorEventLoop):\n    def add_reader(self, *a):\n        raise NotImplementedError\n"+
			"class P(asyncio.DefaultEventLoopPolicy):\n    def new_event_loop(self):\n        return L()\n"+
			"asyncio.set_event_loop_policy(P())", 10*time.Second)
		w.run("await asyncio.sleep(0)\nx = 1", 10*time.Second)
		require.Equal(t, "['replhub-cells']", w.run(threads, 10*time.Second).str("value"))

		fc, ready := adoptWithCells(t, sock) // w.cells stays open
		link := cellLink(t, sock, ready["cells_token"])
		require.NotNil(t, link, "%v", ready)
		cell := int(ready["cell"].(float64))
		link.send(map[string]any{"op": "exec", "cell": cell + 1, "code": "await asyncio.sleep(0)\nx += 1", "fence": "<L1>"})
		done := fc.doneOf(cell + 1)
		require.NotNil(t, done)
		require.Equal(t, "ok", done["status"], "%v", done)
		// Bounded: the first thread looks once a second.
		link.send(map[string]any{"op": "exec", "cell": cell + 2, "fence": "<L2>", "code": "import time\n" +
			"for _ in range(100):\n    if len(" + threads + ") == 1:\n        break\n    time.sleep(0.05)\n" +
			"(" + threads + ", x, " + cellsRead + "[0])"})
		done = fc.doneOf(cell + 2)
		require.NotNil(t, done)
		assert.Equal(t, "(['replhub-cells'], 2, True)", done["value"], "%v", done)
	})
}

// A peer that trickles its first line, a byte at a time, holds the
// worker's socket no longer than a silent one does (5 s): the next hub's
// adopt is taken after it.
func TestSlowFirstLineIsBounded(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(t.TempDir(), "w.sock")
	w := startWorkerWith(t, newestPython(t), nil, false, "--durable", sock)
	w.run("x = 1", 10*time.Second)
	slow, err := net.Dial("unix", sock)
	require.NoError(t, err)
	defer slow.Close()
	stop := make(chan struct{})
	trickled := make(chan struct{})
	go func() {
		defer close(trickled)
		for i := 0; i < 100; i++ {
			if _, err := slow.Write([]byte(" ")); err != nil {
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	defer func() { close(stop); <-trickled }()
	time.Sleep(300 * time.Millisecond)
	t0 := time.Now()
	fc, ready := adoptWithCells(t, sock)
	assert.Less(t, time.Since(t0), 8*time.Second, "the trickle held the socket")
	cell := int(ready["cell"].(float64))
	fc.send(map[string]any{"op": "exec", "cell": cell + 1, "code": "x", "fence": "<A>"})
	done := fc.doneOf(cell + 1)
	require.NotNil(t, done)
	assert.Equal(t, "1", done["value"])
}

// lingeringWorker starts a worker as on a host (--linger), its socket in
// a private runtime folder of its own, on the newest Python.
func lingeringWorker(t *testing.T) *worker {
	t.Helper()
	xdg, err := os.MkdirTemp("", "xdg-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(xdg) })
	require.NoError(t, os.Chmod(xdg, 0o700))
	return startWorkerEnv(t, newestPython(t), []string{"XDG_RUNTIME_DIR=" + xdg}, "--linger", "30")
}

// A worker on a host (--linger) has no cell pipe either: its first ready
// frame gives a cell link token, which the hub uses through a channel to
// its socket (sshd's streamlocal forwarding), and a link with it carries
// its exec frames. An exec frame that comes again (its fence one of the
// last ones') runs once.
func TestLingeringWorkerTakesACellLink(t *testing.T) {
	w := lingeringWorker(t)
	require.NotEmpty(t, w.ready.str("sock"), "%v", w.ready.h)
	w.run("x = 5", 10*time.Second)
	token, _ := w.ready.h["cells_token"].(string)
	require.Len(t, token, 32, "%s", w.ready.line)
	link := cellLink(t, w.ready.str("sock"), token)
	require.NotNil(t, link)
	exec := map[string]any{"op": "exec", "cell": 2, "code": "x += 1\n" + cellsRead, "fence": "<L>"}
	link.send(exec)
	done, _ := w.until("done", 10*time.Second, func(f frame) bool { return f.num("cell") == 2 })
	assert.Equal(t, "(True, 1)", done.str("value"))
	// The same frame again, on the channel (the hub's, when the server
	// closed the link as it went): taken once.
	w.send(exec, nil)
	w.cell = 2
	done = w.run("x", 10*time.Second)
	assert.Equal(t, "6", done.str("value"), "%s", done.line)
	// Or after the next cell's (the next exec went first).
	w.send(exec, nil)
	done = w.run("x", 10*time.Second)
	assert.Equal(t, "6", done.str("value"), "%s", done.line)
}

// A host's server closed the cell link (sshd's ChannelTimeout) as an exec
// frame went on it; the hub sends the frame again on the channel, and an
// interrupt may come before it: the cell is parked, not called finished
// (the hub would report its result lost), and ends unrun once it comes.
func TestInterruptBeforeAFrameSentAgainParksIt(t *testing.T) {
	t.Parallel()
	w := lingeringWorker(t)
	w.run("x = 5", 10*time.Second)
	token, _ := w.ready.h["cells_token"].(string)
	link := cellLink(t, w.ready.str("sock"), token)
	require.NotNil(t, link)
	link.w.(net.Conn).Close()
	time.Sleep(500 * time.Millisecond) // the idle worker sees the link's end
	next := w.cell + 1
	w.send(map[string]any{"op": "interrupt", "cell": next}, nil)
	f := w.read(5 * time.Second)
	require.Equal(t, "interrupted", f.op(), "%s", f.line)
	assert.Equal(t, "parked", f.str("how"))
	done := w.run("x = 6", 10*time.Second)
	assert.EqualValues(t, next, done.num("cell"))
	assert.Equal(t, "KeyboardInterrupt", done.errType(), "%s", done.line)
	assert.Equal(t, "5", w.run("x", 10*time.Second).str("value"))
}

// An adopt that fails before the worker took the new hub's connection
// (no fd left for its copies) closes that connection, so the hub hears
// the failure at once; the worker goes on with its hub, its cell pipe
// too, and takes the next.
func TestFailedAdoptClosesItsConnection(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(t.TempDir(), "w.sock")
	w := startWorkerWith(t, newestPython(t), nil, true, "--durable", sock)
	w.run("x = 1", 10*time.Second)
	// Every fd number taken but one: the accept gets it, its dup fails.
	// (What the accept's path imports is imported first: an import opens
	// files.)
	done := w.run(`import os, resource, json, select, socket, struct
_lim = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (max(int(n) for n in os.listdir("/proc/self/fd")) + 32, _lim[1]))
_fill = []
try:
    while True:
        _fill.append(os.open("/dev/null", os.O_RDONLY))
except OSError:
    pass
os.close(_fill.pop())
len(_fill) > 0`, 10*time.Second)
	require.Equal(t, "True", done.str("value"), "%s", done.line)
	failed := dialWorker(t, sock, map[string]any{"op": "adopt", "cells": true})
	failed.w.(net.Conn).SetReadDeadline(time.Now().Add(8 * time.Second))
	got, err := io.ReadAll(failed.br)
	require.NoError(t, err, "the failed adopt's connection was left open (%q)", got)
	done = w.run(`for _fd in _fill:
    os.close(_fd)
resource.setrlimit(resource.RLIMIT_NOFILE, _lim)
x`, 10*time.Second)
	assert.Equal(t, "1", done.str("value"), "%s", done.line)
	fc, ready := adoptWithCells(t, sock)
	cell := int(ready["cell"].(float64))
	fc.send(map[string]any{"op": "exec", "cell": cell + 1, "code": "x + 1", "fence": "<A>"})
	d := fc.doneOf(cell + 1)
	require.NotNil(t, d)
	assert.Equal(t, "2", d["value"])
}

// Each new hub that adopts a worker during one long cell lets the last
// hub's cell link go: its fd is closed then, not when the cell ends (the
// main thread, which runs the cell, is not selecting on it); so too where
// the last hub's connection and link ended (EOF) before the adopt.
func TestLinksDroppedDuringACellAreClosed(t *testing.T) {
	for _, closed := range []bool{false, true} {
		name := map[bool]string{false: "frozen", true: "closed"}[closed]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sock := filepath.Join(t.TempDir(), "w.sock")
			w := startWorkerWith(t, newestPython(t), nil, true, "--durable", sock)
			w.run("import time", 10*time.Second)
			w.exec("time.sleep(60)")
			pid := w.cmd.Process.Pid
			counts := make([]int, 0, 4)
			var last []*frameConn
			for i := 0; i < 4; i++ {
				if closed {
					for _, c := range last {
						c.w.(net.Conn).Close()
					}
				}
				fc, ready := adoptWithCells(t, sock)
				link := cellLink(t, sock, ready["cells_token"])
				require.NotNil(t, link)
				last = []*frameConn{fc, link}
				// The last connection's reader closes its file as it ends.
				n, stable := 0, 0
				for try := 0; try < 100 && stable < 5; try++ {
					m := openFds(t, pid)
					if m == n {
						stable++
					} else {
						n, stable = m, 0
					}
					time.Sleep(20 * time.Millisecond)
				}
				counts = append(counts, n)
			}
			assert.Equal(t, counts[1], counts[3], "fds after each adopt: %v", counts)
		})
	}
}
