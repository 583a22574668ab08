package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/tests/hubtest"
	"github.com/replhub/replhub/tests/sshtest"
	"github.com/replhub/replhub/wire"
)

// swapFill leaves in session name: data shared between names, a function
// (on a Python that moves code), a socket and an open file (which do not
// pickle), a daemon thread, output nobody has read and the result of a
// cell that outlived its exec.
func swapFill(t *testing.T, e *hubtest.Env, name string, args ...string) {
	t.Helper()
	mark := filepath.Join(t.TempDir(), "printed")
	ok(t, e.Run(append([]string{"exec", name, `import socket, threading, time, os
data = list(range(100000))
alias = data
sock = socket.socket()
fh = open(os.devnull)
ticker = threading.Thread(target=time.sleep, args=(600,), name="ticker", daemon=True)
ticker.start()
_ev = threading.Event()
threading.Thread(target=lambda ev=_ev: (ev.wait(120), time.sleep(0.3), print("between cells"), open(` + fmt.Sprintf("%q", mark) + `, "w").close()), daemon=True).start()`}, args...)...))
	r := e.Run("exec", name, "import sys; sys.version_info >= (3, 8)")
	if strings.Contains(ok(t, r), "True") {
		ok(t, e.Run("exec", name, "def grow(n):\n    data.append(n)\n    return len(data)"))
	}
	// A cell that outlives its exec: its result waits, unread. Once it
	// has ended, the thread prints between cells, and then marks that.
	r = e.Run("exec", name, "time.sleep(1); print('late words'); _ev.set(); del _ev; 42", "-t", "0.2")
	require.Equal(t, 3, r.Code, "%s", r)
	require.Eventually(t, func() bool { _, err := os.Stat(mark); return err == nil }, 60*time.Second, 50*time.Millisecond,
		"the thread printed between cells")
}

func swappedOf(l wire.SessionList, name string) *wire.SwappedInfo {
	for i := range l.Swapped {
		if l.Swapped[i].Name == name {
			return &l.Swapped[i]
		}
	}
	return nil
}

func liveOf(l wire.SessionList, name string) *wire.SessionInfo {
	for i := range l.Sessions {
		if l.Sessions[i].Name == name {
			return &l.Sessions[i]
		}
	}
	return nil
}

// A session swapped to disk comes back at the next exec, where it was,
// with one note: what did not pickle, the thread that ran, and the output
// and result nobody had read.
func TestSwapAndRestore(t *testing.T) {
	t.Parallel()
	pythons(t, func(t *testing.T, py string) {
		e := hubtest.Start(t)
		work := filepath.Join(e.Cwd, "sub")
		require.NoError(t, os.Mkdir(work, 0o700))
		ok(t, e.Run("exec", "keep", "import os; os.chdir("+fmt.Sprintf("%q", work)+")", "--python", py))
		swapFill(t, e, "keep")
		pid := workerPid(t, e, "keep")
		cells := liveOf(sessionList(t, e), "keep").Cells

		r := e.Run("swap", "keep")
		require.Equal(t, 0, r.Code, "%s", r)
		assert.Regexp(t, `^swapped 'keep': \d+ names, \d+ MB in [\d.]+s; not kept: `, r.Stdout)
		for _, n := range []string{"sock (", "fh (", "ticker ("} {
			assert.Contains(t, r.Stdout, n)
		}
		assert.True(t, hubtest.WaitGone(pid, 5*time.Second), "the worker ended")
		l := sessionList(t, e)
		assert.Nil(t, liveOf(l, "keep"))
		sw := swappedOf(l, "keep")
		require.NotNil(t, sw, "sessions lists it: %+v", l)
		assert.Equal(t, "local", sw.Host)
		assert.Equal(t, work, sw.Cwd)
		assert.True(t, sw.Unread)
		assert.Contains(t, sw.Names, "alias")
		assert.Regexp(t, `^keep  swapped [\d.]+s ago  python 3\.\d+\.\d+  \d+ cells  \d+ MB on disk  cwd `, e.Run("sessions").Stdout)
		dir, err := os.Stat(e.Paths.SwapDir())
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o700), dir.Mode().Perm())
		for _, f := range []string{"keep.pickle", "keep.json"} {
			fi, err := os.Lstat(filepath.Join(e.Paths.SwapDir(), f))
			require.NoError(t, err)
			assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), f)
		}
		// wait does not restore it; it says how.
		r = e.Run("wait", "keep")
		assert.Equal(t, 2, r.Code)
		assert.Contains(t, r.Stderr, "session 'keep' is swapped to disk: the next `replhub exec keep CODE`")
		r = e.Run("swap", "keep")
		assert.Equal(t, 0, r.Code, "%s", r)
		assert.Regexp(t, "^'keep' is on disk already: swapped [\\d-]+ [\\d:]+; `replhub exec keep CODE` restores it\n$", r.Stdout)
		// A dead session's swap says it is dead, not that it never was.
		e.Run("exec", "gone", "import os; os._exit(1)")
		r = e.Run("swap", "gone")
		assert.Equal(t, 2, r.Code, "%s", r)
		assert.Contains(t, r.Stderr, "replhub: nothing to swap: session 'gone' died at ")

		r = e.Run("exec", "keep", "(alias is data, len(data), os.getcwd())")
		require.Equal(t, 0, r.Code, "%s", r)
		assert.Regexp(t, `^\[session 'keep' was swapped to disk at [\d-]+ [\d:]+ \([\d.]+s ago; on request\) and is back: \d+ names, python 3\.\d+\.\d+, cwd `+regexp.QuoteMeta(work)+`\n`, r.Stdout)
		assert.Regexp(t, `not swapped \(it did not pickle\): [^\n]*sock \(TypeError: [^\n]*socket`, r.Stdout)
		assert.Contains(t, r.Stdout, "fh (TypeError: an open file (/dev/null) cannot be swapped")
		assert.Contains(t, r.Stdout, "threads that were running then (they are not now): ticker (daemon)")
		assert.Contains(t, r.Stdout, "output nobody had read:\n    between cells")
		assert.Contains(t, r.Stdout, fmt.Sprintf("cell %d's reply, which nobody had read:\n    late words\n    Out[%d]: 42", cells, cells))
		assert.Contains(t, r.Stdout, fmt.Sprintf("Out[%d]: (True, 100000, '%s')", cells+1, work)) // the numbering goes on
		assert.NotContains(t, r.Stdout, "[created session")
		for _, f := range []string{"keep.pickle", "keep.json"} {
			_, err := os.Lstat(filepath.Join(e.Paths.SwapDir(), f))
			assert.True(t, os.IsNotExist(err), "%s deleted once restored", f)
		}
		if strings.Contains(e.Run("exec", "keep", "sys.version_info >= (3, 8)").Stdout, "True") {
			assert.Contains(t, ok(t, e.Run("exec", "keep", "grow(7), data[-1]")), "(100001, 7)")
		}
		// The note is shown once; the session is an ordinary one again.
		r = e.Run("exec", "keep", "sock")
		assert.Equal(t, 1, r.Code)
		assert.Contains(t, r.Stdout, "NameError")
		assert.NotContains(t, r.Stdout, "swapped")
		b, err := os.ReadFile(e.Paths.Transcript("keep"))
		require.NoError(t, err)
		assert.Contains(t, string(b), "# ---- swapped to disk: on request")
		assert.Contains(t, string(b), "# ---- restored from its swap of ")

		// kill deletes a swap.
		ok(t, e.Run("swap", "keep"))
		assert.Contains(t, ok(t, e.Run("kill", "keep")), "deleted the swap of session 'keep'")
		assert.Nil(t, swappedOf(sessionList(t, e), "keep"))
		r = e.Run("exec", "keep", "'data' in globals()")
		assert.Contains(t, r.Stdout, "[created session 'keep'")
		assert.Contains(t, r.Stdout, "Out[1]: False")
	})
}

// Loading a pickle runs code: a swap whose file is group-readable, or
// replaced by a symbolic link, is refused, logged, and left for kill.
func TestSwapRefusesUnsafeFiles(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	newer, _ := hubtest.PickPythons(t)
	e.Setenv("REPLHUB_PYTHON", newer)
	pickle := filepath.Join(e.Paths.SwapDir(), "s.pickle")
	for _, c := range []struct {
		name, want string
		spoil      func()
	}{
		{"group-readable", "has mode 0640", func() { require.NoError(t, os.Chmod(pickle, 0o640)) }},
		{"a symlink", "is a symbolic link", func() {
			other := filepath.Join(e.Dir, "other.pickle")
			require.NoError(t, os.Rename(pickle, other))
			require.NoError(t, os.Symlink(other, pickle))
		}},
		{"record group-writable", "s.json has mode 0620", func() {
			require.NoError(t, os.Chmod(filepath.Join(e.Paths.SwapDir(), "s.json"), 0o620))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ok(t, e.Run("exec", "s", "x = 41"))
			ok(t, e.Run("swap", "s"))
			c.spoil()
			r := e.Run("exec", "s", "x + 1")
			assert.Equal(t, 2, r.Code, "%s", r)
			assert.Contains(t, r.Stderr, "refused to load the swap of session 's': ")
			assert.Contains(t, r.Stderr, c.want)
			assert.Contains(t, r.Stderr, "`replhub kill s` deletes the swap")
			b, _ := os.ReadFile(e.Paths.Log())
			assert.Contains(t, string(b), "swap refused")
			assert.Nil(t, liveOf(sessionList(t, e), "s"), "no session was started")
			r = e.Run("swap", "s")
			assert.Equal(t, 2, r.Code, "%s", r)
			assert.Contains(t, r.Stderr, "refused to load the swap of session 's': ", "swap says why, not 'no session'")
			assert.Contains(t, ok(t, e.Run("kill", "s")), "deleted the swap")
			ents, _ := os.ReadDir(e.Paths.SwapDir())
			assert.Empty(t, ents)
			assert.Contains(t, ok(t, e.Run("exec", "s", "'x' in globals()")), "Out[1]: False")
			ok(t, e.Run("kill", "s"))
		})
	}
}

// A graceful stop swaps every user session, even one whose background job
// it ends; root sessions and running cells end as before. The next hub
// restores the swaps.
func TestSwapAtStop(t *testing.T) {
	t.Parallel()
	f := newFakeSudo(t, "", "")
	e := hubtest.Start(t)
	f.apply(e, "nopasswd")
	newer, older := hubtest.PickPythons(t)
	ok(t, e.Run("exec", "a", "a = 'kept by a'", "--python", newer))
	ok(t, e.Run("exec", "b", "import threading; ev = threading.Event(); th = threading.Thread(target=ev.wait, name='poller'); th.start(); b = 'kept by b'", "--python", older))
	ok(t, e.Run("exec", "ops", "r = 'root'", "--sudo", "--python", newer))
	r := e.Run("exec", "busy", "import time; time.sleep(60)", "-t", "0.3", "--python", newer)
	require.Equal(t, 3, r.Code, "%s", r)

	r = e.Run("stop")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "hub stopping; its user sessions go to disk")
	assert.Zero(t, e.HubPid(), "stop returns once the hub has exited")
	for _, n := range []string{"a", "b"} {
		_, err := os.Lstat(filepath.Join(e.Paths.SwapDir(), n+".json"))
		assert.NoError(t, err, "%s swapped", n)
	}
	for _, n := range []string{"ops", "busy"} {
		_, err := os.Lstat(filepath.Join(e.Paths.SwapDir(), n+".json"))
		assert.True(t, os.IsNotExist(err), "%s not swapped", n)
	}
	l := sessionList(t, e) // a new hub
	assert.Len(t, l.Swapped, 2)
	r = e.Run("exec", "a", "a")
	assert.Contains(t, r.Stdout, "(")
	assert.Contains(t, r.Stdout, "the hub stopped) and is back")
	assert.Contains(t, r.Stdout, "Out[2]: 'kept by a'")
	r = e.Run("exec", "b", "b, th.is_alive() if 'th' in globals() else 'no th'")
	assert.Contains(t, r.Stdout, "threads that were running then (they are not now): poller")
	assert.Contains(t, r.Stdout, "Out[2]: ('kept by b', 'no th')", "%s", r)
	r = e.Run("exec", "ops", "r", "--sudo")
	assert.Contains(t, r.Stdout, "the hub stopped")
	assert.Contains(t, r.Stdout, "NameError")
	r = e.Run("exec", "busy", "1")
	assert.Contains(t, r.Stdout, "the hub stopped")
}

// The sweep swaps what nobody used for swap_after_hours, keeps a session
// with a background job until the job ends, never swaps a root session,
// and deletes a swap not restored within swap_keep_days with a death note.
// The hub's REPLHUB_SWAP_EVERY (for tests) makes the sweep run every 200 ms
// instead of every 10 minutes.
func TestSwapSweep(t *testing.T) {
	t.Parallel()
	f := newFakeSudo(t, "", "")
	e := hubtest.Start(t)
	f.apply(e, "nopasswd")
	newer, _ := hubtest.PickPythons(t)
	e.Setenv("REPLHUB_PYTHON", newer)
	e.Setenv("REPLHUB_SWAP_EVERY", "200ms")
	e.WriteConfig(`{"swap_after_hours": 0.0004}`) // 1.44 s
	ok(t, e.Run("exec", "idle", "x = 1"))
	ok(t, e.Run("exec", "job", "import threading; ev = threading.Event(); threading.Thread(target=ev.wait, name='poller').start()"))
	ok(t, e.Run("exec", "kid", "import subprocess; child = subprocess.Popen(['sleep', '60'])"))
	ok(t, e.Run("exec", "ops", "1", "--sudo"))
	r := e.Run("exec", "busy", "import time; time.sleep(8)", "-t", "0.2")
	require.Equal(t, 3, r.Code, "%s", r)

	waitList := func(what string, cond func(wire.SessionList) bool) wire.SessionList {
		t.Helper()
		var l wire.SessionList
		waitFor(t, func() bool { l = sessionList(t, e); return cond(l) },
			func() string { return fmt.Sprintf("%s: never happened: %+v", what, l) })
		return l
	}
	l := waitList("idle swapped", func(l wire.SessionList) bool { return swappedOf(l, "idle") != nil })
	time.Sleep(time.Second) // a few more rounds
	l = sessionList(t, e)
	for _, n := range []string{"job", "kid", "ops", "busy"} {
		assert.NotNil(t, liveOf(l, n), "%s is kept", n)
	}
	b, _ := os.ReadFile(e.Paths.Log())
	assert.NotContains(t, string(b), `level=ERROR`)

	// The job ends: the session goes at a later round.
	ok(t, e.Run("exec", "job", "ev.set()"))
	ok(t, e.Run("exec", "kid", "child.kill(); child.wait()"))
	waitList("job and kid swapped", func(l wire.SessionList) bool {
		return swappedOf(l, "job") != nil && swappedOf(l, "kid") != nil
	})
	l = waitList("busy swapped once its cell ended", func(l wire.SessionList) bool { return swappedOf(l, "busy") != nil })
	assert.NotNil(t, liveOf(l, "ops"), "a root session is never swapped")
	r = e.Run("swap", "ops")
	assert.Equal(t, 2, r.Code)
	assert.Contains(t, r.Stdout, "kept 'ops' running: a root session is never swapped")
	r = e.Run("swap", "--json")
	require.Equal(t, 0, r.Code, "%s", r)
	var outs []wire.SwapOutcome
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &outs))
	require.Len(t, outs, 1)
	assert.Equal(t, wire.SwapOutcome{Name: "ops", Host: "local", Status: wire.SwapKept, Why: "a root session is never swapped"}, outs[0])

	// An exec restores one; the others expire.
	assert.Contains(t, ok(t, e.Run("exec", "idle", "x")), "Out[2]: 1")
	e.WriteConfig(`{"swap_after_hours": 0, "swap_keep_days": 0.00001}`) // 0.86 s
	l = waitList("swaps expired", func(l wire.SessionList) bool { return len(l.Swapped) == 0 })
	r = e.Run("exec", "job", "1")
	assert.Contains(t, r.Stdout, "was not restored within swap_keep_days")
	assert.Contains(t, r.Stdout, "its state is gone")
	assert.NotNil(t, liveOf(sessionList(t, e), "idle"), "swap_after_hours 0 turns the sweep off")
	r = e.Run("swap")
	assert.Equal(t, 2, r.Code)
	assert.Contains(t, r.Stderr, `swapping is off ("swap_after_hours": 0 in config.json)`)
}

// A remote session's swap comes to this machine, and a restore goes back
// to the same host; session("x") restores too.
func TestSwapRemote(t *testing.T) {
	t.Parallel()
	w := newSSHWorld(t, []string{"lab"}, sshtest.Options{})
	ok(t, w.Run("exec", "far", "import os; blob = os.urandom(20 << 20); here = os.environ.get('SSH_CONNECTION') is not None", "--host", "lab"))
	require.Len(t, remotePids(w.servers["lab"]), 1)
	r := w.Run("swap", "far", "--json")
	require.Equal(t, 0, r.Code, "%s", r)
	var outs []wire.SwapOutcome
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &outs))
	require.Len(t, outs, 1)
	assert.Equal(t, wire.SwapDone, outs[0].Status)
	assert.Equal(t, "lab", outs[0].Host)
	assert.Greater(t, outs[0].Bytes, int64(20<<20))
	waitNoWorkers(t, w.servers["lab"])
	fi, err := os.Lstat(filepath.Join(w.Paths.SwapDir(), "far.pickle"))
	require.NoError(t, err, "the pickle is on this machine")
	assert.Equal(t, outs[0].Bytes, fi.Size())
	assert.Regexp(t, `far  on lab  swapped`, w.Run("sessions").Stdout)

	// Not elsewhere.
	r = w.Run("exec", "far", "1", "--host", "127.0.0.1")
	assert.Equal(t, 2, r.Code)
	assert.Contains(t, r.Stderr, "session 'far' is swapped to disk from lab, not 127.0.0.1")

	r = w.Run("exec", "far", "here, len(blob)")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "[session 'far' on lab was swapped to disk at ")
	assert.Contains(t, r.Stdout, "Out[2]: (True, 20971520)")
	assert.Len(t, remotePids(w.servers["lab"]), 1, "back on lab")
	assert.Regexp(t, `far  on lab  pid \d+`, w.Run("sessions").Stdout)

	// session() from another session restores it as well.
	ok(t, w.Run("swap", "far"))
	waitNoWorkers(t, w.servers["lab"])
	r = w.Run("exec", "near", "s = session('far'); s.get('here')", "--host", "local")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "[session 'far' on lab was swapped to disk at ")
	assert.Contains(t, r.Stdout, "Out[1]: True")

	// A restart keeps local sessions running; a remote one, which cannot
	// outlive its hub, goes to disk and comes back.
	r = w.Run("restart")
	require.Equal(t, 0, r.Code, "%s", r)
	waitNoWorkers(t, w.servers["lab"])
	r = w.Run("exec", "far", "here")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "; the hub restarted) and is back")
	assert.Contains(t, r.Stdout, "Out[3]: True")
	assert.NotContains(t, w.Run("exec", "near", "1").Stdout, "swapped", "a local session went on")
}

// An exec that arrives while its session is being swapped waits for the
// swap, then restores it: nothing is lost and nothing runs in between.
func TestSwapRacesAnExec(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	newer, _ := hubtest.PickPythons(t)
	e.Setenv("REPLHUB_PYTHON", newer)
	ok(t, e.Run("exec", "race", "import os; blob = os.urandom(200 << 20); n = 0"))
	swapped := make(chan hubtest.Result, 1)
	go func() { swapped <- e.Run("swap", "race") }()
	// The exec comes once the swap is under way (or done, on a machine
	// slow enough that a CLI call outlasts the swap of 200 MB).
	waitFor(t, func() bool {
		l := sessionList(t, e)
		live := liveOf(l, "race")
		return swappedOf(l, "race") != nil || live != nil && strings.HasPrefix(live.Serving, "swap")
	})
	r := e.Run("exec", "race", "n += 1; n, len(blob)")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "Out[2]: (1, 209715200)")
	s := <-swapped
	assert.Equal(t, 0, s.Code, "%s", s)
	assert.Contains(t, s.Stdout, "swapped 'race'")
	assert.Contains(t, r.Stdout, "was swapped to disk at", "the exec waited for the swap and restored it")
}

// A second SIGTERM during the stop's swaps stops the hub at once: the swap
// under way is cancelled, and its session ends with a death note.
func TestSwapSecondSignalStopsAtOnce(t *testing.T) {
	e := hubtest.Start(t)
	newer, _ := hubtest.PickPythons(t)
	ok(t, e.Run("exec", "slow", `import time
class Slow:
    def __reduce__(self):
        time.sleep(60)
        return (Slow, ())
slow = Slow()`, "--python", newer))
	pid := e.HubPid()
	require.NotZero(t, pid)
	require.NoError(t, syscall.Kill(pid, syscall.SIGTERM))
	// The swap of slow is under way (its pickling sleeps) when the second
	// signal comes.
	time.Sleep(time.Second)
	require.True(t, hubtest.Alive(pid), "the hub waits for the swap")
	t0 := time.Now()
	require.NoError(t, syscall.Kill(pid, syscall.SIGTERM))
	require.True(t, hubtest.WaitGone(pid, 10*time.Second))
	assert.Less(t, time.Since(t0), 5*time.Second)
	ents, _ := os.ReadDir(e.Paths.SwapDir())
	assert.Empty(t, ents, "no swap, and no part file left")
	r := e.Run("exec", "slow", "1")
	assert.Contains(t, r.Stdout, "the hub stopped", "%s", r)
	b, _ := os.ReadFile(e.Paths.Log())
	assert.Contains(t, string(b), "a second signal: the hub stops without swapping the rest")
}

// A name that fails to load at the restore (its module was uninstalled
// meanwhile) costs only itself; the pickle is kept aside, not deleted, and
// the note says where.
func TestSwapOneBadNameCostsOnlyItself(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	newer, _ := hubtest.PickPythons(t)
	e.Setenv("REPLHUB_PYTHON", newer)
	mod := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(mod, "gonemod.py"), []byte("class Thing:\n    pass\n"), 0o600))
	ok(t, e.Run("exec", "m", "import sys; sys.path.insert(0, "+fmt.Sprintf("%q", mod)+"); import gonemod\n"+
		"a = [gonemod.Thing()]\nb = list(range(10))\nc = 'still here'"))
	ok(t, e.Run("swap", "m"))
	require.NoError(t, os.Remove(filepath.Join(mod, "gonemod.py")))
	os.RemoveAll(filepath.Join(mod, "__pycache__"))
	r := e.Run("exec", "m", "[n for n in ('a', 'b', 'c') if n in globals()], c")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "Out[2]: (['b', 'c'], 'still here')", "only 'a' is lost:\n%s", r.Stdout)
	assert.Contains(t, r.Stdout, "not restored (it did not load): ")
	m := regexp.MustCompile(`the swap is kept in (\S+\.pickle)`).FindStringSubmatch(r.Stdout)
	require.NotNil(t, m, "%s", r.Stdout)
	assert.Equal(t, filepath.Join(e.Paths.SwapDir(), "kept"), filepath.Dir(m[1]))
	fi, err := os.Lstat(m[1])
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	assert.Nil(t, swappedOf(sessionList(t, e), "m"), "restored: the swap is no longer listed")
}

// A disk that fills while a name is written fails the whole swap, with one
// line that says so, and the session goes on; it does not lose the name.
func TestSwapFullDiskFailsTheSwap(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	newer, _ := hubtest.PickPythons(t)
	e.Setenv("REPLHUB_PYTHON", newer)
	ok(t, e.Run("exec", "full", `import os, resource, signal
model = os.urandom(4 << 20)
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, resource.RLIM_INFINITY))  # 1 MB left on the disk`))
	r := e.Run("swap", "full")
	assert.NotEqual(t, 0, r.Code, "a swap that could not write must fail:\n%s", r)
	assert.Regexp(t, `^could not swap 'full': writing the swap: File too large\n$`, r.Stdout+r.Stderr)
	assert.NotNil(t, liveOf(sessionList(t, e), "full"), "the session goes on")
	assert.Contains(t, ok(t, e.Run("exec", "full", "len(model)")), "4194304")
	ents, _ := os.ReadDir(e.Paths.SwapDir())
	assert.Empty(t, ents, "no swap, and no part file left")
}

// A stop that comes while the sweep swaps a session lets that swap finish
// (the stop does not cancel it), and the session comes back from it.
func TestSwapStopWaitsForTheSweepsSwap(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	newer, _ := hubtest.PickPythons(t)
	e.Setenv("REPLHUB_PYTHON", newer)
	e.Setenv("REPLHUB_SWAP_EVERY", "200ms")
	ok(t, e.Run("exec", "slow", `import time
class Slow:
    def __reduce__(self):
        time.sleep(4)
        return (str, ('slow',))
slow = Slow()
x = 'kept'`))
	e.WriteConfig(`{"swap_after_hours": 0.0003}`) // 1.08 s
	waitFor(t, func() bool { s := liveOf(sessionList(t, e), "slow"); return s != nil && s.Serving != "" },
		func() string { return "the sweep never swapped 'slow'" })
	s := liveOf(sessionList(t, e), "slow")
	require.NotNil(t, s)
	require.Contains(t, s.Serving, "swap", "the sweep's swap is under way")
	r := e.Run("stop")
	require.Equal(t, 0, r.Code, "%s", r)
	_, err := os.Lstat(filepath.Join(e.Paths.SwapDir(), "slow.json"))
	assert.NoError(t, err, "a graceful stop must swap the session the sweep was swapping")
	e.WriteConfig(`{"swap_after_hours": 0}`)
	r = e.Run("exec", "slow", "x")
	assert.Contains(t, r.Stdout, "'kept'", "%s", r)
}

// `replhub kill NAME` while NAME is being restored ends it for good: the
// swap is deleted, the kill and the exec say so, and the next exec starts
// afresh.
func TestSwapKillDuringRestoreDeletesTheSwap(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	newer, _ := hubtest.PickPythons(t)
	e.Setenv("REPLHUB_PYTHON", newer)
	// Loading nap says so in a file, then sleeps until the kill.
	loading := filepath.Join(t.TempDir(), "loading")
	ok(t, e.Run("exec", "nap", fmt.Sprintf(`class Nap:
    def __reduce__(self):
        return (exec, ("open(%%r, 'w').close(); import time; time.sleep(60)" %% %q,))
nap = Nap()
secret = 'old state'`, loading)))
	ok(t, e.Run("swap", "nap"))
	done := make(chan hubtest.Result, 1)
	go func() { done <- e.Run("exec", "nap", "1") }() // restores
	waitFor(t, func() bool { _, err := os.Stat(loading); return err == nil })
	k := e.Run("kill", "nap")
	assert.Contains(t, k.Stdout, "killed session 'nap' and deleted its swap", "%s", k)
	r := <-done
	assert.Contains(t, r.Stderr, "session 'nap' was killed on request while its swap was loaded; the swap is deleted", "%s", r)
	assert.Nil(t, swappedOf(sessionList(t, e), "nap"), "killed, yet the swap is still listed")
	r = e.Run("exec", "nap", "'secret' in globals()")
	assert.Contains(t, r.Stdout, "False", "kill should have freed the name:\n%s", r)
}

// A name may start with a dot: its swap is listed, and the sweep does not
// take it for a stale part file.
func TestSwapNameWithALeadingDot(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	newer, _ := hubtest.PickPythons(t)
	e.Setenv("REPLHUB_PYTHON", newer)
	ok(t, e.Run("exec", ".cache", "x = 'precious'"))
	ok(t, e.Run("swap", ".cache"))
	assert.NotNil(t, swappedOf(sessionList(t, e), ".cache"), "sessions should list the swap")
	old := time.Now().Add(-2 * time.Hour)
	for _, f := range []string{".cache.pickle", ".cache.json"} {
		os.Chtimes(filepath.Join(e.Paths.SwapDir(), f), old, old)
	}
	e.Run("swap") // the sweep
	r := e.Run("exec", ".cache", "x")
	assert.Contains(t, r.Stdout, "'precious'", "%s", r)
}
