package tests

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/tests/hubtest"
	"github.com/replhub/replhub/wire"
)

// stillServes checks that the hub answers after a bad input.
func stillServes(t *testing.T, e *hubtest.Env) {
	t.Helper()
	r := e.Run("exec", "canary", "'ok'")
	require.Equal(t, 0, r.Code, "the hub no longer serves: %s", r)
	assert.Contains(t, r.Stdout, "'ok'")
}

// fakeWorker writes an executable "python" that ignores the worker file and
// speaks the frame protocol badly in the way body says. Its ready frame
// tells a streams token, so that fence(c) can write a cell's fence to its
// output (fd 2) as stdout, as a real worker does: without it the hub waits
// out fenceWait (2 s) for each cell. It answers no swap frame, so a test
// whose fake session is alive at the end kills it (killFake).
func fakeWorker(t *testing.T, dir, body string) string {
	t.Helper()
	newer, _ := hubtest.PickPythons(t)
	p := filepath.Join(dir, "fakepython")
	script := "#!" + newer + "\n" + `import json, os, sys
out = os.fdopen(1, "wb", 0)
TOKEN = "5ca1ab1e0ddba115"
def frame(d):
    out.write(json.dumps(d).encode() + b"\n")
def ready():
    frame({"op": "ready", "proto": 2, "python": "3.99.0", "pid": os.getpid(), "cwd": os.getcwd(), "executable": "fake", "cloudpickle": False, "streams": TOKEN})
def fence(c):
    mark = b"\x1e\x1f" + TOKEN.encode()
    os.write(2, mark + b"1\x1f\x1e" + c["fence"].encode() + mark + b"2\x1f\x1e")
def cells():
    for line in sys.stdin.buffer:
        c = json.loads(line)
        if c.get("op") == "exec":
            yield c
` + body
	require.NoError(t, os.WriteFile(p, []byte(script), 0o755))
	return p
}

// TestMalformedFramesInALoop has a worker send 200,000 lines that are
// not frames (two bytes each, as a cell's writes to the frame channel
// can): each was a line of the hub's log, some 32 MB in all in the
// runtime folder; now the first few are, and a line at each power of ten.
// The cell's reply still tells of them, and the session goes on.
func TestMalformedFramesInALoop(t *testing.T) {
	t.Parallel()
	e, py := fakeWorld(t, `
ready()
for c in cells():
    out.write(b"x\n" * 200000)
    fence(c)
    frame({"op": "done", "cell": c["cell"], "status": "ok", "value": "'fine'", "error": None, "duration": 0.01})
`)
	r := e.Run("exec", "loop", "1", "--python", py)
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "Out[1]: 'fine'")
	assert.Contains(t, r.Stdout, "more notes from the worker were dropped")
	fi, err := os.Stat(e.Paths.Log())
	require.NoError(t, err)
	assert.Less(t, fi.Size(), int64(16<<10), "the hub's log after 200,000 malformed frames")
	log, _ := os.ReadFile(e.Paths.Log())
	assert.True(t, strings.Contains(string(log), "count=100000 logged=10"), "no line in the log for the 100,000th")
	r = e.Run("exec", "loop", "2")
	assert.Equal(t, 0, r.Code, "the session goes on: %s", r)
	killFake(t, e, "loop")
}

func TestMalformedFramesFromWorker(t *testing.T) {
	t.Parallel()
	e, py := fakeWorld(t, `
ready()
for c in cells():
    out.write(b"this is not a frame\n")
    out.write(b'{"op": "done", "cell": \n')
    out.write(b'[1, 2, 3]\n')
    os.write(2, b"cell output")
    fence(c)
    frame({"op": "done", "cell": c["cell"], "status": "ok", "value": "'fine'", "error": None, "duration": 0.01})
`)
	r := e.Run("exec", "bad", "1", "--python", py)
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "cell output")
	assert.Contains(t, r.Stdout, "Out[1]: 'fine'")
	assert.Contains(t, r.Stdout, `the worker sent a malformed frame (`)
	assert.Contains(t, r.Stdout, `this is not a frame`)
	r = e.Run("exec", "bad", "2")
	assert.Equal(t, 0, r.Code, "the session goes on: %s", r)
	stillServes(t, e)
	killFake(t, e, "bad")
}

// killFake kills a fake worker's session: the hub's stop would first ask
// it to swap, which it never answers, and wait (hubtest.StopHub gives up
// and kills the hub after 15 s).
// fakeWorld starts a world whose python3 is the newest found, and writes
// a fakeWorker of body into its folder, for --python.
func fakeWorld(t *testing.T, body string) (*hubtest.Env, string) {
	t.Helper()
	e := hubtest.Start(t)
	newer, _ := hubtest.PickPythons(t)
	e.Setenv("REPLHUB_PYTHON", newer)
	return e, fakeWorker(t, e.Dir, body)
}

func killFake(t *testing.T, e *hubtest.Env, name string) {
	t.Helper()
	r := e.Run("kill", name)
	require.Equal(t, 0, r.Code, "%s", r)
}

func TestBrokenFrameStreamKillsTheWorker(t *testing.T) {
	t.Parallel()
	e, py := fakeWorld(t, `
ready()
for c in cells():
    out.write(b"x" * (20 << 20))
    import time; time.sleep(30)
`)
	r := e.Run("exec", "broken", "1", "--python", py)
	assert.Equal(t, 4, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "broke the frame protocol (protocol violation: a frame header over")
	stillServes(t, e)
}

func TestNoiseBeforeReadyIsShownOnlyWhenStartFails(t *testing.T) {
	t.Parallel()
	e, py := fakeWorld(t, `
out.write(b"Welcome to the machine\n")
ready()
for c in cells():
    fence(c)
    frame({"op": "done", "cell": c["cell"], "status": "ok", "value": None, "error": None, "duration": 0.01})
`)
	r := e.Run("exec", "noisy", "1", "--python", py)
	require.Equal(t, 0, r.Code, "%s", r)
	assert.NotContains(t, r.Stdout, "Welcome")

	py = fakeWorker(t, t.TempDir(), `
out.write(b"rc file says hello\n")
sys.stderr.write("and then it broke\n")
sys.exit(5)
`)
	r = e.Run("exec", "dies", "1", "--python", py)
	assert.Equal(t, 2, r.Code)
	assert.Contains(t, r.Stderr, "session 'dies' did not start")
	assert.Contains(t, r.Stderr, "exited with status 5")
	assert.Contains(t, r.Stderr, "rc file says hello")
	assert.Contains(t, r.Stderr, "and then it broke")
	stillServes(t, e)
	killFake(t, e, "noisy")
}

func TestFloodsAndOddBytes(t *testing.T) {
	t.Parallel()
	pythons(t, func(t *testing.T, py string) {
		e := hubtest.Start(t)
		e.Setenv("REPLHUB_PYTHON", py)
		res, r := jsonResult(t, e, "exec", "--json", "flood", `import sys; sys.stdout.write("z" * (50 << 20)); "after"`)
		require.Equal(t, 0, r.Code, "%s", r)
		assert.True(t, res.Truncated)
		assert.Less(t, len(res.Output), 31000)
		assert.Equal(t, "'after'", *res.Value)

		res, r = jsonResult(t, e, "exec", "--json", "flood", `import os; os.write(1, b"ok \xff\xfe bytes\x00 and NUL\n"); print("\u00e9")`)
		require.Equal(t, 0, r.Code, "%s", r)
		assert.Equal(t, "ok \ufffd\ufffd bytes␀ and NUL\né\n", res.Output)
		notes := strings.Join(res.Notes, "\n")
		assert.Contains(t, notes, "2 bytes that are not UTF-8")
		assert.Contains(t, notes, "1 NUL bytes")

		// Binary junk in a repr and in the code itself.
		r = e.Run("exec", "flood", `bytes(range(256))`)
		assert.Equal(t, 0, r.Code, "%s", r)
		assert.Contains(t, r.Stdout, `\x00\x01`)
		r = e.RunInput("x = 1\x00", "exec", "flood", "-")
		assert.Equal(t, 1, r.Code, "%s", r)
		assert.Contains(t, r.Stdout, "null")
		stillServes(t, e)
	})
}

func TestSocketFolderOpenToOthersIsRefused(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	dir := e.Paths.Runtime
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.Chmod(dir, 0o755))
	r := e.Run("sessions")
	assert.Equal(t, 2, r.Code)
	assert.Contains(t, r.Stderr, "has mode 0755, open to others; run: chmod 700 "+dir)
	require.NoError(t, os.Chmod(dir, 0o700))
	assert.Equal(t, 0, e.Run("sessions").Code)
}

func TestPeerOfAnotherUidIsRefused(t *testing.T) {
	t.Parallel()
	if os.Getuid() != 0 {
		t.Skip("needs root to run a client as another user")
	}
	sysPython, err := exec.LookPath("/usr/bin/python3")
	if err != nil {
		t.Skip("needs /usr/bin/python3 for the stranger's client")
	}
	e := hubtest.Start(t)
	newer, _ := hubtest.PickPythons(t)
	r := e.Run("exec", "mine", "secret = 42", "--python", newer)
	require.Equal(t, 0, r.Code, "%s", r)
	// Open the way to the socket, as a careless user might.
	for _, d := range []string{e.Dir, e.Runtime, e.Paths.Runtime} {
		require.NoError(t, os.Chmod(d, 0o755))
	}
	require.NoError(t, os.Chmod(e.Paths.Socket(), 0o777))
	req := fmt.Sprintf(`{"v":%d,"op":"exec","name":"mine","code":"secret"}`, wire.Version)
	script := fmt.Sprintf(`import socket
s = socket.socket(socket.AF_UNIX)
s.connect(%q)
try:
    s.sendall(%q.encode() + b"\n")
except OSError:
    pass  # the hub may have refused and closed before the request went out
s.settimeout(10)
print(s.recv(65536).decode())`, e.Paths.Socket(), req)
	cmd := exec.Command("setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", sysPython, "-c", script)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "refused")
	assert.Contains(t, string(out), "a hub serves only its own user")
	assert.NotContains(t, string(out), "42")
	log, _ := os.ReadFile(e.Paths.Log())
	assert.Contains(t, string(log), "refused a connection")

	// And a client run as another user refuses a hub (its folder) that is not its own.
	cmd = exec.Command("setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", e.Bin, "sessions")
	cmd.Env = append(e.Vars, "HOME=/tmp")
	out, _ = cmd.CombinedOutput()
	assert.Contains(t, string(out), "is owned by uid 0, not by you")
	for _, d := range []string{e.Dir, e.Runtime, e.Paths.Runtime} {
		require.NoError(t, os.Chmod(d, 0o700))
	}
	stillServes(t, e)
}

func TestMalformedRequestsAreAnswered(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	require.Equal(t, 0, e.Run("start").Code)
	c, err := net.Dial("unix", e.Paths.Socket())
	require.NoError(t, err)
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 4096)
	v := fmt.Sprintf(`{"v":%d,`, wire.Version)
	for _, line := range []string{"not json", v + `"op":"frobnicate"}`, `{"v":99,"op":"ping"}`, "\x00\xff\xfe"} {
		_, err := c.Write([]byte(line + "\n"))
		require.NoError(t, err)
		n, err := c.Read(buf)
		require.NoError(t, err)
		assert.Contains(t, string(buf[:n]), `"err"`, line)
	}
	_, err = c.Write([]byte(v + `"op":"ping"}` + "\n"))
	require.NoError(t, err)
	n, err := c.Read(buf)
	require.NoError(t, err)
	assert.Contains(t, string(buf[:n]), "pong")

	// A password length out of bounds is answered, and the connection,
	// out of step, is closed.
	_, err = c.Write([]byte(v + `"op":"ping","password_len":99999}` + "\nxyz"))
	require.NoError(t, err)
	n, err = c.Read(buf)
	require.NoError(t, err)
	assert.Contains(t, string(buf[:n]), "password_len 99999 is not between 0 and 4096")
	_, err = c.Read(buf)
	assert.ErrorIs(t, err, io.EOF)
}

// --python names a new session's interpreter: given for a live session
// that runs another, the cell runs there as before, with a note that says
// so; given as the one it runs, nothing is said.
func TestPythonForALiveSession(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	newer, older := hubtest.PickPythons(t)
	ok(t, e.Run("exec", "p", "1", "--python", newer))
	r := e.Run("exec", "p", "import sys; sys.executable", "--python", newer)
	require.Equal(t, 0, r.Code, "%s", r)
	assert.NotContains(t, r.Stdout+r.Stderr, "names the interpreter", "the same python: %s", r)
	r = e.Run("exec", "p", "import sys; sys.version_info[:2]", "--python", older)
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "--python "+older+" names the interpreter of a new session only; `replhub kill p`", "%s", r)

	// A relative path is the caller's, in its folder (the hub's is
	// another).
	bin := filepath.Join(e.Cwd, "venv", "bin")
	require.NoError(t, os.MkdirAll(bin, 0o755))
	require.NoError(t, os.Symlink(older, filepath.Join(bin, "python")))
	r = e.Run("exec", "rel", "import sys; sys.executable", "--python", "./venv/bin/python")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, filepath.Join(bin, "python"), "%s", r)
}
