package boot

import (
	"bufio"
	"encoding/json"
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
)

// frameConn reads and writes frames on one stream (a durable worker's
// socket, or its pipes).
type frameConn struct {
	t  *testing.T
	br *bufio.Reader
	w  io.Writer
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

// cell reads frames until a done frame and out frames up to fence have
// come, and returns both.
func (c *frameConn) cell(fence string) (done map[string]any, out []byte) {
	for i := 0; i < 10000 && (done == nil || !strings.Contains(string(out), fence)); i++ {
		h, data := c.next()
		switch h["op"] {
		case "done":
			done = h
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
		fi, err := os.Stat(sock)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "the socket is the user's alone")

		// Output reaches the first hub's stream, as without --durable.
		first.send(map[string]any{"op": "exec", "cell": 1, "code": "x = 5; print('to the first hub')", "fence": "<F1>"})
		h, _ = first.next()
		require.Equal(t, "done", h["op"])
		got := make([]byte, 0, 64)
		buf := make([]byte, 64)
		for !strings.Contains(string(got), "<F1>") {
			n, err := errR.Read(buf)
			require.NoError(t, err)
			got = append(got, buf[:n]...)
		}
		assert.Equal(t, "to the first hub\n<F1>", string(got))

		// The hub goes away while cell 2 runs.
		first.send(map[string]any{"op": "exec", "cell": 2, "code": "import time; time.sleep(0.5); print('while alone'); x + 1", "fence": "<F2>"})
		time.Sleep(100 * time.Millisecond)
		inW.Close()
		outR.Close()
		errR.Close()
		time.Sleep(800 * time.Millisecond)
		require.True(t, alive(pid), "the worker outlives its hub")

		c, err := net.Dial("unix", sock)
		require.NoError(t, err)
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		next := &frameConn{t: t, br: bufio.NewReader(c), w: c}
		next.send(map[string]any{"op": "adopt"})
		h, _ = next.next()
		require.Equal(t, "ready", h["op"])
		assert.Equal(t, true, h["adopted"])
		assert.EqualValues(t, 2, h["cell"])
		assert.Equal(t, true, h["running"], "its done frame is still to come")
		assert.Equal(t, "<F2>", h["fence"])
		done, out := next.cell("<F2>")
		assert.EqualValues(t, 2, done["cell"])
		assert.Equal(t, "6", done["value"])
		assert.Equal(t, "while alone\n<F2>", string(out))

		// It goes on with the new hub; output now comes in out frames.
		next.send(map[string]any{"op": "exec", "cell": 3, "code": "print('to the new hub'); x", "fence": "<F3>"})
		done, out = next.cell("<F3>")
		assert.Equal(t, "5", done["value"])
		assert.Equal(t, "to the new hub\n<F3>", string(out))

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
