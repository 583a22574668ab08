package boot

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/proto"
)

// frameConn reads and writes frames on one stream (a durable worker's
// socket, or its pipes).
type frameConn struct {
	t  *testing.T
	br *bufio.Reader
	w  io.Writer
}

// adoptOn connects to a durable worker's socket as a new hub does, and
// sends adopt; the ready frame is next.
func adoptOn(t *testing.T, sock string) *frameConn {
	t.Helper()
	return dialWorker(t, sock, map[string]any{"op": "adopt"})
}

// dialWorker connects to a durable worker's socket and sends first; the
// connection is given 30 s.
func dialWorker(t *testing.T, sock string, first map[string]any) *frameConn {
	t.Helper()
	c, err := net.Dial("unix", sock)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(30 * time.Second))
	fc := &frameConn{t: t, br: bufio.NewReader(c), w: c}
	fc.send(first)
	return fc
}

func (c *frameConn) send(h map[string]any) {
	b, err := json.Marshal(h)
	require.NoError(c.t, err)
	_, err = c.w.Write(append(b, '\n'))
	require.NoError(c.t, err)
}

// next reads one frame and its payload.
func (c *frameConn) next() (map[string]any, []byte) {
	line, err := c.br.ReadBytes('\n')
	require.NoError(c.t, err)
	var h map[string]any
	require.NoError(c.t, json.Unmarshal(line, &h), "%q", line)
	var data []byte
	if n, ok := h["len"].(float64); ok && n > 0 {
		data = make([]byte, int(n))
		_, err := io.ReadFull(c.br, data)
		require.NoError(c.t, err)
	}
	return h, data
}

// cell reads frames until cell n's done frame and out frames up to fence
// have come, and returns both. An adopted worker sends its last done frame
// again, which is skipped here as a hub skips it.
func (c *frameConn) cell(n int, fence string) (done map[string]any, out []byte) {
	for i := 0; i < 10000 && (done == nil || !strings.Contains(string(out), fence)); i++ {
		h, data := c.next()
		switch h["op"] {
		case "done":
			if cell, _ := h["cell"].(float64); int(cell) == n {
				done = h
			}
		case "out":
			out = append(out, data...)
		}
	}
	return done, out
}

// A durable worker outlives the end of its frame stream: its cell goes
// on, what it prints and its done frame wait, and a hub that connects to
// its socket and sends adopt gets a ready frame that says where it is,
// then both; the exit frame ends it and its socket goes.
func TestDurableWorkerIsAdopted(t *testing.T) {
	eachPython(t, func(t *testing.T, py string) {
		dir := t.TempDir()
		path, err := Install(dir)
		require.NoError(t, err)
		sock := filepath.Join(dir, "w.sock")
		inR, inW, err := os.Pipe()
		require.NoError(t, err)
		outR, outW, err := os.Pipe()
		require.NoError(t, err)
		errR, errW, err := os.Pipe()
		require.NoError(t, err)
		cmd := exec.Command(py, path, "--stdio", "--durable", sock)
		cmd.Dir = dir
		cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		require.NoError(t, cmd.Start())
		inR.Close()
		outW.Close()
		errW.Close()
		pid := cmd.Process.Pid
		waited := make(chan struct{})
		go func() { cmd.Wait(); close(waited) }()
		t.Cleanup(func() {
			syscall.Kill(-pid, syscall.SIGKILL)
			<-waited
		})
		first := &frameConn{t: t, br: bufio.NewReader(outR), w: inW}
		h, _ := first.next()
		require.Equal(t, "ready", h["op"])
		token, _ := h["streams"].(string)
		require.NotEmpty(t, token, "the ready frame tells the streams token")
		fi, err := os.Stat(sock)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "the socket is the user's alone")

		// Output reaches the first hub's stream, as without --durable.
		first.send(map[string]any{"op": "exec", "cell": 1, "code": "x = 5; print('to the first hub')", "fence": "<F1>"})
		h, _ = first.next()
		require.Equal(t, "done", h["op"])
		assert.Equal(t, []any{"x"}, h["names"])
		got := make([]byte, 0, 64)
		buf := make([]byte, 64)
		_, closing := proto.StreamMarkers(token)
		for !strings.Contains(string(got), "<F1>"+string(closing)) {
			n, err := errR.Read(buf)
			require.NoError(t, err)
			got = append(got, buf[:n]...)
		}
		assert.Equal(t, "to the first hub\n<F1>", split(token, got).all)

		// The hub goes away while cell 2 runs.
		first.send(map[string]any{"op": "exec", "cell": 2, "code": "import time; time.sleep(0.5); print('while alone'); x + 1", "fence": "<F2>"})
		time.Sleep(100 * time.Millisecond)
		inW.Close()
		outR.Close()
		errR.Close()
		time.Sleep(800 * time.Millisecond)
		require.True(t, alive(pid), "the worker outlives its hub")

		next := adoptOn(t, sock)
		h, _ = next.next()
		require.Equal(t, "ready", h["op"])
		assert.Equal(t, true, h["adopted"])
		assert.EqualValues(t, 2, h["cell"])
		assert.Equal(t, true, h["running"], "its done frame is still to come")
		assert.Equal(t, "<F2>", h["fence"])
		assert.Equal(t, token, h["streams"], "an adopted worker tells its token again")
		assert.Equal(t, []any{"time", "x"}, h["names"], "and its names, as its last done frame had them")
		done, out := next.cell(2, "<F2>")
		assert.EqualValues(t, 2, done["cell"])
		assert.Equal(t, "6", done["value"])
		assert.Equal(t, "while alone\n<F2>", split(token, out).stdout)

		// It goes on with the new hub; output now comes in out frames.
		next.send(map[string]any{"op": "exec", "cell": 3, "code": "print('to the new hub'); x", "fence": "<F3>"})
		done, out = next.cell(3, "<F3>")
		assert.Equal(t, "5", done["value"])
		assert.Equal(t, []any{"time", "x"}, done["names"], "a new hub is sent the names, changed or not")
		assert.Equal(t, "to the new hub\n<F3>", split(token, out).stdout)

		next.send(map[string]any{"op": "exit"})
		select {
		case <-waited:
		case <-time.After(5 * time.Second):
			t.Fatal("the exit frame did not end the worker")
		}
		waitGone(t, "the socket", 2*time.Second, func() bool {
			_, err := os.Stat(sock)
			return os.IsNotExist(err)
		})
	})
}

// A worker on a host (--linger) serves its socket in a private
// $XDG_RUNTIME_DIR, says where in its ready frame, takes a new hub over
// from one that still looks attached (a link that died silently), moves
// its socket to the fallback folder when its folder goes, and ends, its
// socket with it, when no hub came within its linger.
func TestLingeringWorker(t *testing.T) {
	eachPython(t, func(t *testing.T, py string) {
		xdg, err := os.MkdirTemp("", "xdg-")
		require.NoError(t, err)
		defer os.RemoveAll(xdg)
		require.NoError(t, os.Chmod(xdg, 0o700))
		w := startWorkerEnv(t, py, []string{"XDG_RUNTIME_DIR=" + xdg}, "--linger", "2")
		sock, alt := w.ready.str("sock"), w.ready.str("sock_alt")
		require.Equal(t, xdg, filepath.Dir(sock), "%v", w.ready.h)
		assert.Equal(t, fmt.Sprintf("/tmp/replhub-%d/%s", os.Getuid(), filepath.Base(sock)), alt)
		ents, _ := os.ReadDir(xdg)
		require.Len(t, ents, 1, "the socket and nothing else")
		fi, err := os.Stat(sock)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
		w.run("x = 5", 10*time.Second)

		adopt := func(path string) *frameConn {
			c, err := net.Dial("unix", path)
			require.NoError(t, err)
			t.Cleanup(func() { c.Close() })
			c.SetDeadline(time.Now().Add(20 * time.Second))
			fc := &frameConn{t: t, br: bufio.NewReader(c), w: c}
			fc.send(map[string]any{"op": "adopt"})
			h, _ := fc.next()
			require.Equal(t, "ready", h["op"])
			require.Equal(t, true, h["adopted"])
			return fc
		}
		// Something that is not a hub is dropped; the worker goes on.
		c, err := net.Dial("unix", sock)
		require.NoError(t, err)
		c.Write([]byte("not a frame\n"))
		c.Close()

		// The first hub still holds its pipes; a new one takes over.
		next := adopt(sock)
		next.send(map[string]any{"op": "exec", "cell": 2, "code": "x + 1", "fence": "<F2>"})
		done, _ := next.cell(2, "<F2>")
		assert.Equal(t, "6", done["value"])
		// And again, over a link that looks alive.
		third := adopt(sock)
		third.send(map[string]any{"op": "exec", "cell": 3, "code": "x + 2", "fence": "<F3>"})
		done, _ = third.cell(3, "<F3>")
		assert.Equal(t, "7", done["value"])

		// The hub goes, then the folder: the socket moves.
		third.w.(net.Conn).Close()
		require.NoError(t, os.RemoveAll(xdg))
		waitGone(t, "the socket in its old folder", 3*time.Second, func() bool {
			_, err := os.Stat(alt)
			return err == nil
		})
		fourth := adopt(alt)
		fourth.send(map[string]any{"op": "exec", "cell": 4, "code": "x + 3", "fence": "<F4>"})
		done, _ = fourth.cell(4, "<F4>")
		assert.Equal(t, "8", done["value"])

		// No hub for longer than the linger: the worker ends, its socket
		// with it.
		fourth.w.(net.Conn).Close()
		pid := w.cmd.Process.Pid
		waitGone(t, "the worker", 8*time.Second, func() bool { return !alive(pid) })
		waitGone(t, "the socket", 2*time.Second, func() bool {
			_, err := os.Stat(alt)
			return os.IsNotExist(err)
		})
	})
}

// The folder of a lingering worker's socket must be a real folder of the
// socket's owner with no group or other bits.
func TestLingerFolderChecks(t *testing.T) {
	eachPython(t, func(t *testing.T, py string) {
		dir := t.TempDir()
		path, err := Install(dir)
		require.NoError(t, err)
		good := filepath.Join(dir, "good")
		require.NoError(t, os.Mkdir(good, 0o700))
		open := filepath.Join(dir, "open")
		require.NoError(t, os.Mkdir(open, 0o755))
		link := filepath.Join(dir, "link")
		require.NoError(t, os.Symlink(good, link))
		other := filepath.Join(dir, "other")
		require.NoError(t, os.Mkdir(other, 0o700))
		require.NoError(t, os.Chown(other, 4242, 4242))
		made := filepath.Join(dir, "made")
		code := fmt.Sprintf(`import importlib.util, os, stat
spec = importlib.util.spec_from_file_location("w", %q)
w = importlib.util.module_from_spec(spec); spec.loader.exec_module(w)
print([w._private_dir(p) for p in (%q, %q, %q, %q, %q)], w._private_dir(%q, create=True), oct(stat.S_IMODE(os.stat(%q).st_mode)))`,
			path, good, open, link, other, made, made, made)
		out, err := exec.Command(py, "-c", code).CombinedOutput()
		require.NoError(t, err, "%s", out)
		assert.Equal(t, "[True, False, False, False, False] True 0o700", strings.TrimSpace(string(out)))
	})
}

// A hub that adopts the worker while a cell holds every thread (here
// thread starts fail) has its frames read all the same, by the thread
// that takes hubs, until a thread of its own can be started; then the
// next hub is taken.
func TestAdoptedWithoutAThread(t *testing.T) {
	eachPython(t, func(t *testing.T, py string) {
		sock := filepath.Join(t.TempDir(), "w.sock")
		w := startWorker(t, py, "--durable", sock)
		started, release := filepath.Join(w.dir, "started"), filepath.Join(w.dir, "release")
		cell := w.exec(fmt.Sprintf("import os, threading, time\n"+
			"for _ in range(1000):  # the socket's own thread is up too\n"+
			"    if 'replhub-accept' in {t.name for t in threading.enumerate()}:\n        break\n"+
			"    time.sleep(0.01)\n"+noThreadsLeft+
			"try:\n    open(%s, 'w').close()\n"+
			"    for _ in range(3000):\n        if os.path.exists(%s):\n            break\n        time.sleep(0.01)\n"+
			"finally:\n"+threadsBack+"6 * 7", pyStr(started), pyStr(release)))
		waitFile(t, started, 10*time.Second)

		// pong reads frames until the answer to a ping.
		pong := func(c *frameConn, id int) {
			t.Helper()
			c.send(map[string]any{"op": "ping", "id": id})
			for i := 0; i < 100; i++ {
				if h, _ := c.next(); h["op"] == "pong" {
					assert.EqualValues(t, id, h["id"])
					return
				}
			}
			t.Fatalf("no pong for ping %d", id)
		}
		next := adoptOn(t, sock)
		h, _ := next.next()
		require.Equal(t, "ready", h["op"])
		assert.Equal(t, true, h["running"], "%v", h)
		pong(next, 1)
		require.NoError(t, os.WriteFile(release, nil, 0o600))
		done, _ := next.cell(cell, "")
		require.NotNil(t, done, "the cell's done frame reaches the new hub")
		assert.Equal(t, "42", done["value"])
		next.send(map[string]any{"op": "exec", "cell": cell + 1, "code": "1 + 1", "fence": "<F>"})
		done, _ = next.cell(cell+1, "")
		require.NotNil(t, done)
		assert.Equal(t, "2", done["value"])

		// Threads start again: the next frame hands the reading to a thread
		// of its own, and a newer hub takes over a link that still looks
		// alive.
		pong(next, 2)
		third := adoptOn(t, sock)
		h, _ = third.next()
		require.Equal(t, "ready", h["op"])
		pong(third, 3)
	})
}
