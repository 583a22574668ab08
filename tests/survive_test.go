package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/tests/hubtest"
	"github.com/replhub/replhub/tests/sshtest"
)

// What kills a naive REPL (a recursion error in the parser, an exception
// whose text is megabytes) ends the cell with an error, not the session, on
// the newest and the oldest Python.
func TestOrdinaryCodeDoesNotKillTheSession(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	newer, older := hubtest.PickPythons(t)
	for i, py := range []string{newer, older} {
		name := fmt.Sprintf("py%d", i)
		r := e.Run("exec", name, "keep = 41", "--python", py)
		require.Equal(t, 0, r.Code, "%s", r)
		r = e.Run("exec", name, `eval("1+"*3000+"1")`)
		assert.Contains(t, []int{0, 1}, r.Code, "a value or a RecursionError, by Python: %s", r)
		r = e.Run("exec", name, `d = {}; d["k"*9_000_000]`)
		if strings.HasPrefix(filepath.Base(py), "python3.6") && strings.Contains(r.Stdout, "SyntaxError") {
			// 3.6 has no digit separators.
			r = e.Run("exec", name, `d = {}; d["k"*9000000]`)
		}
		assert.Equal(t, 1, r.Code, "%.2000s", r)
		assert.Contains(t, r.Stdout, "KeyError")
		assert.Less(t, len(r.Stdout), 100_000, "the 9 MB message is capped")
		r = e.Run("exec", name, `"x" * 50000000`)
		assert.Equal(t, 0, r.Code, "%.2000s", r)
		assert.Less(t, len(r.Stdout), 100_000, "the 50 MB value is capped")
		r = e.Run("exec", name, "keep + 1")
		require.Equal(t, 0, r.Code, "%s", r)
		assert.Contains(t, r.Stdout, "42")
	}
	stillServes(t, e)
}

// An interrupt that arrives while a big cell is still being parsed is not
// lost: interrupt says what it did, and the cell ends with
// KeyboardInterrupt before its last line runs.
func TestInterruptWhileParsing(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	marker := filepath.Join(e.Dir, "ran-to-the-end")
	r := e.Run("exec", "big", "import os")
	require.Equal(t, 0, r.Code, "%s", r)
	code := strings.Repeat("x = 1\n", 300_000) + fmt.Sprintf("open(%q, 'w').close()\n", marker)
	cell := make(chan hubtest.Result, 1)
	go func() { cell <- e.RunInput(code, "exec", "big", "-", "-t", "60") }()
	// Interrupt as soon as the cell is known to the hub (running).
	var ans hubtest.Result
	for i := 0; i < 200; i++ {
		ans = e.Run("interrupt", "big")
		if !strings.Contains(ans.Stdout, "idle") {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	require.Equal(t, 0, ans.Code, "%s", ans)
	// Compiling 300,000 lines holds the interpreter; on a loaded machine
	// the worker's answer may come after the hub's 2 s, and the interrupt
	// still lands: the cell below ends with KeyboardInterrupt.
	assert.Regexp(t, `had not started yet|interrupted cell 2|did not answer within`, ans.Stdout)
	var res hubtest.Result
	select {
	case res = <-cell:
	case <-time.After(70 * time.Second):
		t.Fatal("the interrupted cell did not return")
	}
	assert.Equal(t, 1, res.Code, "%.2000s", res)
	assert.Contains(t, res.Stdout, "KeyboardInterrupt")
	_, err := os.Stat(marker)
	assert.True(t, os.IsNotExist(err), "the cell ran to its end")
	t.Logf("interrupt answered: %s", strings.TrimSpace(ans.Stdout))
	r = e.Run("exec", "big", "6 * 7")
	require.Equal(t, 0, r.Code, "%s", r)
}

// A worker that dies on its own, or is killed from outside the hub, takes
// the processes its cells started with it.
func TestWorkerDeathEndsItsChildren(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	deaths := map[string]func(name string){
		"os._exit": func(name string) { e.Run("exec", name, "os._exit(3)") },
		"SIGKILL":  func(name string) { syscall.Kill(workerPid(t, e, name), syscall.SIGKILL) },
	}
	for how, die := range deaths {
		t.Run(how, func(t *testing.T) {
			name := "parent" + strings.Trim(how, "._")
			r := e.Run("exec", name, "import os, subprocess; p = subprocess.Popen(['sleep', '300']); p.pid")
			require.Equal(t, 0, r.Code, "%s", r)
			var child int
			_, err := fmt.Sscanf(r.Stdout[strings.Index(r.Stdout, "Out[1]: "):], "Out[1]: %d", &child)
			require.NoError(t, err, r.Stdout)
			require.True(t, hubtest.Alive(child))
			t.Cleanup(func() { syscall.Kill(child, syscall.SIGKILL) })
			die(name)
			assert.True(t, hubtest.WaitGone(child, 3*time.Second), "the cell's child outlived its worker")
			r = e.Run("sessions")
			assert.Contains(t, r.Stdout, name, "a death note is listed")
		})
	}
	stillServes(t, e)
}

// A remote host's worker that sends an absurd frame len ends its own
// session, never the hub or the host's other sessions.
func TestRemoteHugeFrameLenEndsOnlyItsSession(t *testing.T) {
	t.Parallel()
	w := newSSHWorld(t, []string{"lab"}, sshtest.Options{})
	r := w.Run("exec", "calm", "keep = 41", "--host", "lab")
	require.Equal(t, 0, r.Code, "%s", r)
	r = w.Run("exec", "hostile", "import os", "--host", "lab")
	require.Equal(t, 0, r.Code, "%s", r)
	r = w.Run("exec", "hostile", `os.write(4, b'{"op":"pong","len":68719476736}\n'); import time; time.sleep(30)`)
	assert.Equal(t, 4, r.Code, "the session is reported dead: %s", r)
	assert.Contains(t, r.Stdout+r.Stderr, "broke the frame protocol")
	r = w.Run("exec", "calm", "keep + 1")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "42")
	stillServes(t, w.Env)
}

// A session opened from code under the name of one that died hears what
// became of its predecessor, as the CLI would.
func TestOpenFromCodeTellsOfThePredecessor(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	r := e.Run("exec", "opener", `session("gone").put(x=1)`)
	require.Equal(t, 0, r.Code, "%s", r)
	require.Equal(t, 4, e.Run("exec", "gone", "import os; os._exit(7)").Code)
	r = e.Run("exec", "opener", `session("gone").put(x=2)`)
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "exited with status 7", "%s", r)
}

// TestCellThatClosesTheWorkersChannel has a cell close the worker's end of
// its frame stream to the hub, a descriptor it did not open, then open a
// file of its own, which takes that number. The worker's frames do not go
// into the file (its done frame did), and the cell does not look running
// for good: its reply says what happened and what to do, as the next
// exec's does; a restart then takes the session up again, its state and
// the file whole.
func TestCellThatClosesTheWorkersChannel(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	newer, _ := hubtest.PickPythons(t)
	e.Setenv("REPLHUB_PYTHON", newer)
	cellClosesTheChannel(t, e, "fd", "rd")
}

// TestRootCellThatClosesTheWorkersChannel is the same for a root session,
// through the real sudo: sudo, the worker's parent, holds a copy of the
// channel, so its end never came and the cell looked running for good.
// The worker now says, in a last frame, that its code closed the channel.
func TestRootCellThatClosesTheWorkersChannel(t *testing.T) {
	t.Parallel()
	if os.Getuid() != 0 {
		t.Skip("a root session without a password needs root (CI runs as root)")
	}
	if _, err := exec.LookPath("sudo"); err != nil {
		t.Skip("needs sudo")
	}
	e := hubtest.Start(t)
	newer, _ := hubtest.PickPythons(t)
	e.Setenv("REPLHUB_PYTHON", newer)
	cellClosesTheChannel(t, e, "rootfd", "rootrd", "--sudo")
}

// TestRemoteCellThatClosesTheWorkersChannel is the same on a host: a copy
// of the worker's output there kept the link's end from coming, and the
// cell looked running for good. Its state cannot be reached again (no
// later hub has a host's session), and says so; the hub's restart, whose
// stop would have waited on the session's swap for good, goes through.
func TestRemoteCellThatClosesTheWorkersChannel(t *testing.T) {
	t.Parallel()
	w := newSSHWorld(t, []string{"lab"}, plainLogin(t))
	r := w.Run("exec", "h", "import gc, os, sys; n = 1", "--host", "lab")
	require.Equal(t, 0, r.Code, "%s", r)
	r = w.Run("exec", "h", `ch = [o for o in gc.get_objects() if isinstance(o, sys.modules["replhub_worker"].Channel)][0]
os.close(ch._w)
f = open(`+fmt.Sprintf("%q", filepath.Join(t.TempDir(), "victim.txt"))+`, "w")
assert f.fileno() == ch._w`, "-t", "20")
	said := "the worker of session 'h' on lab lives, but its channel to the hub was closed by its own code"
	assert.Equal(t, 1, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "ChannelClosed: "+said)
	r = w.Run("exec", "h", "n")
	assert.Equal(t, 2, r.Code, "%s", r)
	assert.Contains(t, r.Stderr, said)
	assert.Contains(t, r.Stderr, "its state cannot be reached again: `replhub kill h` ends it")
	start := time.Now()
	r = w.Run("restart")
	assert.Equal(t, 0, r.Code, "%s", r)
	assert.Less(t, time.Since(start), 15*time.Second)

	// The read end: the kill's exit frame cannot be read there, so the
	// hub tells the worker through its socket, as a new hub would.
	ok(t, w.Run("exec", "hr", "import gc, os, sys", "--host", "lab"))
	r = w.Run("exec", "hr", `ch = [o for o in gc.get_objects() if isinstance(o, sys.modules["replhub_worker"].Channel)][0]
fd = ch._r.fileno()
os.close(fd)
g = open("/dev/null")
g.fileno() == fd`)
	// The reader may find its end closed before the cell's end is sent
	// (a frame from the hub wakes it): the cell ends as ChannelClosed then.
	assert.True(t, r.Code == 0 && strings.Contains(r.Stdout, "True") || r.Code == 1 && strings.Contains(r.Stdout, "ChannelClosed"), "%s", r)
	r = w.Run("vars", "hr")
	assert.Contains(t, r.Stdout+r.Stderr, "its state cannot be reached again: `replhub kill hr` ends it")
	r = w.Run("kill", "hr")
	assert.Equal(t, 0, r.Code, "%s", r)
	assert.NotContains(t, ok(t, w.Run("sessions")), "hr ")
}

// TestQuietCellThatClosesTheWorkersChannel has a cell close the write end
// of the worker's channel, then run on without a word (no output, no
// file on the number): the worker's copy of that end, kept to say that
// the channel was closed, kept the stream's end from the hub until the
// worker next wrote a frame, and the cell looked running until its end.
// Its reply now says what happened within seconds, on the newest and the
// oldest Python.
func TestQuietCellThatClosesTheWorkersChannel(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	newestAndOldest(t, func(py, version string) {
		name := "quiet-" + version
		r := e.Run("exec", name, "import gc, os, sys, time", "--python", py)
		require.Equal(t, 0, r.Code, "%s", r)
		start := time.Now()
		r = e.Run("exec", name, `ch = [o for o in gc.get_objects() if isinstance(o, sys.modules["replhub_worker"].Channel)][0]
os.close(ch._w)
time.sleep(40)`, "-t", "60")
		assert.Equal(t, 1, r.Code, "%s", r)
		assert.Contains(t, r.Stdout, fmt.Sprintf("ChannelClosed: the worker of session '%s' lives, but its channel to the hub was closed by its own code", name))
		assert.Less(t, time.Since(start), 20*time.Second, "the cell looked running until its end")
		e.Run("kill", name)
	})
}

// cellClosesTheChannel has a cell of session fd close the write end of
// the worker's channel, one of rd its read end; start opens each
// session (--sudo).
func cellClosesTheChannel(t *testing.T, e *hubtest.Env, fd, rd string, start ...string) {
	victim := filepath.Join(e.Dir, "victim.txt")
	r := e.Run(append([]string{"exec", fd, "import gc, os, sys; n = 1"}, start...)...)
	require.Equal(t, 0, r.Code, "%s", r)
	r = e.Run("exec", fd, `ch = [o for o in gc.get_objects() if isinstance(o, sys.modules["replhub_worker"].Channel)][0]
os.close(ch._w)
f = open(`+fmt.Sprintf("%q", victim)+`, "w")
assert f.fileno() == ch._w`, "-t", "20")
	said := fmt.Sprintf("the worker of session '%s' lives, but its channel to the hub was closed by its own code", fd)
	assert.Equal(t, 1, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "ChannelClosed: "+said)
	r = e.Run("exec", fd, "n")
	assert.Equal(t, 2, r.Code, "%s", r)
	assert.Contains(t, r.Stderr, said)

	r = e.Run("restart")
	require.Equal(t, 0, r.Code, "%s", r)
	e.Run("wait", fd, "-t", "10") // the cell's end, kept for the next hub
	r = e.Run("exec", fd, `f.write("the user's\n"); f.close(); n`)
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "Out[3]: 1")
	b, err := os.ReadFile(victim)
	require.NoError(t, err)
	assert.Equal(t, "the user's\n", string(b), "nothing of the worker's went into the cell's file")

	// The other way: the worker's end of the hub's frames, whose number
	// the cell's file to read then takes. The worker reads none of it,
	// and closes it neither when the hub goes nor when the next adopts it.
	theirs := filepath.Join(e.Dir, "theirs.txt")
	require.NoError(t, os.WriteFile(theirs, []byte(`{"op": "ping"}`+"\n"), 0o644))
	r = e.Run(append([]string{"exec", rd, "import gc, os, sys; n = 2"}, start...)...)
	require.Equal(t, 0, r.Code, "%s", r)
	r = e.Run("exec", rd, `ch = [o for o in gc.get_objects() if isinstance(o, sys.modules["replhub_worker"].Channel)][0]
fd = ch._r.fileno()
os.close(fd)
g = open(`+fmt.Sprintf("%q", theirs)+`)
g.fileno() == fd`)
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "Out[2]: True")
	// A query's frame wakes the reader, which finds its end closed: the
	// query is not left to wait out its bound (17 s).
	start2 := time.Now()
	r = e.Run("vars", rd)
	assert.Less(t, time.Since(start2), 10*time.Second, "%s", r)
	r = e.Run("exec", rd, "n", "-t", "20")
	assert.Equal(t, 2, r.Code, "%s", r)
	assert.Contains(t, r.Stderr, fmt.Sprintf("the worker of session '%s' lives, but its channel to the hub was closed by its own code", rd))
	r = e.Run("restart")
	require.Equal(t, 0, r.Code, "%s", r)
	r = e.Run("exec", rd, "g.read(), n")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, `Out[3]: ('{"op": "ping"}\n', 2)`)
}

// TestForkedChildIsNoSecondWorker forks in a cell, with no exec: the child
// ran on past the cell's end as a second worker, took every other cell,
// and answered for it, its own copy of the state drifting from the
// session's. It now ends with its cell, as a script's child would at the
// script's end; the session's cells all run in its worker, in turn. On the
// newest and the oldest Python (3.6 has no os.register_at_fork).
func TestForkedChildIsNoSecondWorker(t *testing.T) {
	t.Parallel()
	forkedChildIsNoSecondWorker(t, "fork", "os", "os.fork()")
}

// TestCForkedChildIsNoSecondWorker is TestForkedChildIsNoSecondWorker
// for a fork made in C (libc's fork, as an extension module may call it),
// which runs no os.register_at_fork hook: told by such a hook alone, the
// child ran on as a second worker and answered for the session's cells.
func TestCForkedChildIsNoSecondWorker(t *testing.T) {
	t.Parallel()
	forkedChildIsNoSecondWorker(t, "cfork", "ctypes, os", "ctypes.CDLL(None).fork()")
}

// forkedChildIsNoSecondWorker has a cell of session prefix-VERSION fork by
// fork (a Python expression, with imports imported first), then counts six
// cells and asks that each ran once, in the worker.
func forkedChildIsNoSecondWorker(t *testing.T, prefix, imports, fork string) {
	e := hubtest.Start(t)
	newestAndOldest(t, func(py, version string) {
		name := prefix + "-" + version
		r := e.Run("exec", name, "import "+imports+"; n = 0; os.getpid()", "--python", py)
		require.Equal(t, 0, r.Code, "%s", r)
		pid := strings.TrimSpace(r.Stdout[strings.LastIndex(r.Stdout, "Out[1]: ")+8:])
		r = e.Run("exec", name, "child = "+fork+` == 0
print("child" if child else "parent")`)
		require.Equal(t, 0, r.Code, "%s", r)
		for i := 1; i <= 6; i++ {
			r = e.Run("exec", name, "n += 1; n, os.getpid()")
			require.Equal(t, 0, r.Code, "%s", r)
			assert.Contains(t, r.Stdout, fmt.Sprintf("Out[%d]: (%d, %s)", i+2, i, pid), "cell %d", i+2)
		}
	})
}

// TestForkedChildExitsAsAScriptWould forks children that end their cell
// with sys.exit(3), sys.exit("bye") and an exception: each exited with 0,
// the exception's traceback nowhere. Each now ends as Python does at a
// script's end: 3; "bye" on stderr and 1; the traceback on stderr and 1 (the
// CLI shows the cell's stderr with its stdout).
func TestForkedChildExitsAsAScriptWould(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	newestAndOldest(t, func(py, version string) {
		r := e.Run("exec", "forkexit-"+version, `import os, sys, time
def status(end):
    pid = os.fork()
    if pid == 0:
        end()
    return os.waitpid(pid, 0)[1] >> 8
def boom():
    raise ValueError("boom in the child")
[status(lambda: sys.exit(3)), status(lambda: sys.exit("bye")), status(boom)]`, "--python", py)
		require.Equal(t, 0, r.Code, "%s", r)
		assert.Contains(t, r.Stdout, "Out[1]: [3, 1, 1]", "%s", r)
		assert.Contains(t, r.Stdout, "bye\n", "%s", r)
		assert.Contains(t, r.Stdout, "ValueError: boom in the child", "%s", r)
	})
}

// TestForkedChildEndsWhileAThreadHoldsTheSessionsLock forks while another
// thread holds the worker's session lock, as its reader does while it
// dispatches a frame: the child, which has no such thread, waited for the
// lock at its cell's end for good. It now exits there with 0.
func TestForkedChildEndsWhileAThreadHoldsTheSessionsLock(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	newestAndOldest(t, func(py, version string) {
		r := e.Run("exec", "forklock-"+version, `import gc, os, threading, time
s = next(o for o in gc.get_objects() if type(o).__name__ == "Session" and hasattr(o, "cond") and hasattr(o, "sigint"))
held = threading.Event()
def hold():
    with s.cond:
        held.set()
        time.sleep(1)
threading.Thread(target=hold).start()
held.wait()
pid = os.fork()
if pid:
    for _ in range(100):
        p, st = os.waitpid(pid, os.WNOHANG)
        if p:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        st = "hung"
    print("child:", st)`, "--python", py)
		require.Equal(t, 0, r.Code, "%s", r)
		assert.Contains(t, r.Stdout, "child: 0\n", "%s", r)
	})
}

// TestRebindingBuiltinsLeavesTheWorkerWhole deletes and rebinds builtins
// the worker's own code calls (len, str, isinstance, dict), and os's
// functions (write, read, fstat, as a mock would): the worker used the
// cells' own, so the cell's end raised in replhub or never came, and the
// session looked running for good. The worker now has copies of its own;
// the cells still share the builtins module (a helper put there is found
// by name). On the newest and the oldest Python.
func TestRebindingBuiltinsLeavesTheWorkerWhole(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	newestAndOldest(t, func(py, version string) {
		name := "builtins-" + version
		r := e.Run("exec", name, "import builtins; saved = dict(builtins.__dict__); builtins.helper = lambda: 42", "--python", py)
		require.Equal(t, 0, r.Code, "%s", r)
		r = e.Run("exec", name, "del builtins.len; builtins.str = builtins.isinstance = builtins.dict = builtins.repr = None", "-t", "10")
		assert.Equal(t, 0, r.Code, "%s", r)
		r = e.Run("exec", name, "helper() + 1", "-t", "10")
		assert.Equal(t, 0, r.Code, "%s", r)
		assert.Contains(t, r.Stdout, "Out[3]: 43")
		r = e.Run("exec", name, "builtins.__dict__.update(saved); len(saved) > 100", "-t", "10")
		assert.Equal(t, 0, r.Code, "%s", r)
		assert.Contains(t, r.Stdout, "Out[4]: True")
		r = e.Run("exec", name, "import os; kept = os.write, os.read, os.fstat; os.write = os.read = os.fstat = None", "-t", "10")
		assert.Equal(t, 0, r.Code, "%s", r)
		r = e.Run("exec", name, "print('still'); os.write, os.read, os.fstat = kept; helper()", "-t", "10")
		assert.Equal(t, 0, r.Code, "%s", r)
		assert.Equal(t, "still\nOut[6]: 42\n", r.Stdout)
	})
}

// TestReplhubModulesShareTheCellsBuiltins imports a module of the user's as
// replhub.NAME that calls a helper a cell put in builtins: the module was
// run with the worker's own copy of the builtins, where the helper is not,
// and raised NameError. Its builtins are now the cells', as any import's.
func TestReplhubModulesShareTheCellsBuiltins(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	dir := filepath.Join(e.Config, "replhub", "modules")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "usehelper.py"), []byte("def f():\n    return helper() + 1\n"), 0o644))
	newestAndOldest(t, func(py, version string) {
		r := e.Run("exec", "modbuiltins-"+version, `import builtins; builtins.helper = lambda: 41
from replhub import usehelper
usehelper.f()`, "--python", py)
		require.Equal(t, 0, r.Code, "%s", r)
		assert.Contains(t, r.Stdout, "Out[1]: 42", "%s", r)
	})
}

// newestAndOldest calls f with the newest and the oldest Python found, and
// its version folder's name (3.13.0).
func newestAndOldest(t *testing.T, f func(py, version string)) {
	newer, older := hubtest.PickPythons(t)
	for _, py := range []string{newer, older} {
		f(py, filepath.Base(filepath.Dir(filepath.Dir(py))))
	}
}
