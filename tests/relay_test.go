package tests

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/payload"
	"github.com/replhub/replhub/tests/hubtest"
	"github.com/replhub/replhub/tests/sshtest"
)

// needCloudpickle skips (in CI: fails) where this machine has no
// cloudpickle: moving code needs it.
func needCloudpickle(t *testing.T) {
	t.Helper()
	if payload.CloudpickleDir() == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("CI needs cloudpickle (apt-get install python3-cloudpickle)")
		}
		t.Skip("needs cloudpickle (apt-get install python3-cloudpickle)")
	}
}

// py picks an interpreter of a minor, or skips.
func py(t *testing.T, minor string) string {
	t.Helper()
	p, ok := hubtest.Pythons()[minor]
	if !ok {
		t.Skipf("needs Python %s", minor)
	}
	return p
}

func ok(t *testing.T, r hubtest.Result) string {
	t.Helper()
	require.Equal(t, 0, r.Code, "%s", r)
	return r.Stdout
}

func TestObjectsLocalToLocal(t *testing.T) {
	t.Parallel()
	needCloudpickle(t)
	e := hubtest.Start(t)
	e.Setenv("REPLHUB_PYTHON", py(t, "3.11"))
	ok(t, e.Run("exec", "staging", "def helper(x):\n    return -x\nscale = 100"))
	out := ok(t, e.Run("exec", "a", `rows = [1, 2, 3]
factor = 3
def helper(x):
    return x * 10
def parse(v):
    return [helper(i) for i in v]
def twice(v):
    return [double(i) for i in v]
def double(i):
    return i * 2
def make_adder(n):
    return lambda x: x + n + factor
staging = session("staging")
staging`))
	assert.Contains(t, out, "Out[1]: <session 'staging' here, python 3.11.")
	out = ok(t, e.Run("exec", "a", `staging.put(rows=rows, parse=parse)
staging.call(parse, rows), staging.call(twice, rows), staging.call(make_adder(1), 1), staging.call(lambda: scale)`))
	// The target's own helper wins; a helper it lacks travels; a closure
	// keeps its cell; a lambda sees the target's names.
	assert.Contains(t, out, "Out[2]: ([-1, -2, -3], [2, 4, 6], 5, 100)")
	out = ok(t, e.Run("exec", "a", `staging.call("parse", [7]), staging.get("rows"), staging.get("rows", "scale")`))
	assert.Contains(t, out, "Out[3]: ([-7], [1, 2, 3], ([1, 2, 3], 100))")
	out = ok(t, e.Run("exec", "staging", "rows, double(4)"))
	assert.Contains(t, out, "([1, 2, 3], 8)", "put names and travelled helpers land in the target")

	// Open text files come back as their contents.
	require.NoError(t, os.WriteFile(e.Cwd+"/notes.txt", []byte("line one\nline two\n"), 0o644))
	out = ok(t, e.Run("exec", "a", `staging.call(lambda: open("notes.txt"))`))
	assert.Contains(t, out, `'line one\nline two\n'`)

	// A socket stays where it was made: into= keeps it there; a copy is
	// refused with the hint.
	out = ok(t, e.Run("exec", "a", `import socket
staging.call(lambda: socket.socket(), into="sock")
staging.call(lambda: type(sock).__name__)`))
	assert.Contains(t, out, "'socket'")
	r := e.Run("exec", "a", `staging.get("sock")`)
	assert.Equal(t, 1, r.Code)
	assert.Contains(t, r.Stdout, "cannot copy it to another session")
	assert.Contains(t, r.Stdout, "into='name'")
	r = e.Run("exec", "a", `staging.put(s=socket.socket())`)
	assert.Contains(t, r.Stdout, "A socket, a lock or an open connection stays in the session that made it")

	// Errors over there come back with their traceback, naming the sender's cell.
	r = e.Run("exec", "a", "def bad(v):\n    return v / 0\nstaging.call(bad, 1)")
	assert.Equal(t, 1, r.Code)
	assert.Regexp(t, `File "<from a: cell-\d+>", line 2, in bad`, r.Stdout)
	assert.Contains(t, r.Stdout, "ZeroDivisionError")
	r = e.Run("exec", "a", `staging.get("nope")`)
	assert.Contains(t, r.Stdout, "session has no name 'nope'")

	// The target's transcript records what it served, with the function's source.
	b, err := os.ReadFile(e.Paths.Transcript("staging"))
	require.NoError(t, err)
	assert.Contains(t, string(b), "# ---- put from 'a': parse, rows · ")
	assert.Regexp(t, `# ---- call from 'a': · \S+\n# def twice\(v\):\n#     return \[double\(i\) for i in v\]\n`, string(b))
	assert.Contains(t, string(b), "# ---- call from 'a', kept as sock: · ")

	out = ok(t, e.Run("exec", "a", `[s["name"] for s in sessions()]`))
	assert.Contains(t, out, "['a', 'staging']")
	ok(t, e.Run("exec", "a", `staging.kill()`))
	assert.NotContains(t, ok(t, e.Run("sessions")), "staging  pid")
}

func TestObjectsVersionGuard(t *testing.T) {
	t.Parallel()
	needCloudpickle(t)
	e := hubtest.Start(t)
	ok(t, e.Run("exec", "p311", "x = 1", "--python", py(t, "3.11")))
	ok(t, e.Run("exec", "p312", "y = 2", "--python", py(t, "3.12")))
	out := ok(t, e.Run("exec", "p311", `t = session("p312")
t.put(d={"a": [1, 2], "b": (3.5, None)})
t.call("repr", {"k": "v"})`))
	assert.Contains(t, out, `Out[2]: "{'k': 'v'}"`, "data crosses versions")
	out = ok(t, e.Run("exec", "p312", "d"))
	assert.Contains(t, out, "{'a': [1, 2], 'b': (3.5, None)}")
	r := e.Run("exec", "p311", "t.call(lambda: 1)")
	assert.Equal(t, 1, r.Code)
	assert.Contains(t, r.Stdout, "made by Python 3.11: this session runs Python 3.12")
	r = e.Run("exec", "p311", "def f():\n    return 1\nt.put(f=f)")
	assert.Contains(t, r.Stdout, "made by Python 3.11: this session runs Python 3.12")
	// And back: a function from 3.12 into 3.11 is refused the same way.
	r = e.Run("exec", "p312", `session("p311").call(lambda: 2)`)
	assert.Contains(t, r.Stdout, "made by Python 3.12: this session runs Python 3.11")
}

func TestObjectsPython36MovesData(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	old := py(t, "3.6")
	ok(t, e.Run("exec", "old", "import sys; rows = list(range(5))", "--python", old))
	ok(t, e.Run("exec", "new", "z = 1", "--python", py(t, "3.11")))
	out := ok(t, e.Run("exec", "old", `n = session("new")
n.put(rows=rows)
n.call("sum", rows), n.get("z")`))
	assert.Contains(t, out, "(10, 1)")
	r := e.Run("exec", "old", "n.call(lambda: 1)")
	assert.Equal(t, 1, r.Code)
	assert.Contains(t, r.Stdout, "moving code needs cloudpickle (this is Python 3.6, where replhub moves data only)")
	out = ok(t, e.Run("exec", "new", `session("old").get("rows")`))
	assert.Contains(t, out, "[0, 1, 2, 3, 4]")
}

func TestObjectsBusyInterruptAndDeath(t *testing.T) {
	t.Parallel()
	needCloudpickle(t)
	e := hubtest.Start(t)
	e.Setenv("REPLHUB_PYTHON", py(t, "3.11"))
	ok(t, e.Run("exec", "slow", "import time\ndef nap(s):\n    time.sleep(s)\n    return s"))
	ok(t, e.Run("exec", "caller", `s = session("slow")`))

	// A target serving a call is busy, saying whom it serves.
	r := e.Run("exec", "caller", `s.call("nap", 30)`, "-t", "0.5")
	require.Equal(t, 3, r.Code, "%s", r)
	r = e.Run("exec", "slow", "1")
	assert.Equal(t, 2, r.Code)
	assert.Contains(t, r.Stderr, "session 'slow' is busy: it is serving a call from 'caller'")
	r = e.Run("sessions")
	assert.Contains(t, r.Stdout, "serving a call from 'caller'")

	// Interrupting the caller interrupts the call over there.
	ok(t, e.Run("interrupt", "caller"))
	r = e.Run("wait", "caller", "-t", "10")
	assert.Contains(t, r.Stdout, "KeyboardInterrupt", "%s", r)
	// The interrupted call ends over there, and the target is free again.
	assert.Contains(t, ok(t, freeAgain(t, e, "slow", "'free again'")), "'free again'")
	b, _ := os.ReadFile(e.Paths.Transcript("slow"))
	assert.Contains(t, string(b), "# ---- call from 'caller': · ")

	// Interrupting the target itself stops what it serves; the caller hears why.
	r = e.Run("exec", "caller", `s.call("nap", 30)`, "-t", "0.5")
	require.Equal(t, 3, r.Code, "%s", r)
	r = e.Run("interrupt", "slow")
	assert.Contains(t, r.Stdout, "interrupted the call session 'slow' was serving for 'caller'")
	r = e.Run("wait", "caller", "-t", "10")
	assert.Contains(t, r.Stdout, "KeyboardInterrupt", "%s", r)

	// A target that dies mid-call gives the caller a clear error, not a hang.
	r = e.Run("exec", "caller", `s.call(lambda: __import__("os")._exit(5))`, "-t", "20")
	assert.Equal(t, 1, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "session 'slow' died while serving the call: exited with status 5")
	out := ok(t, e.Run("exec", "caller", "'caller lives'"))
	assert.Contains(t, out, "'caller lives'")

	// A target killed mid-call, likewise.
	ok(t, e.Run("exec", "slow2", "import time"))
	r = e.Run("exec", "caller", `session("slow2").call(lambda: time.sleep(60))`, "-t", "0.5")
	require.Equal(t, 3, r.Code, "%s", r)
	ok(t, e.Run("kill", "slow2"))
	r = e.Run("wait", "caller", "-t", "10")
	assert.Contains(t, r.Stdout, "session 'slow2' died while serving the call: killed on request", "%s", r)
}

func TestObjectsAcrossHosts(t *testing.T) {
	t.Parallel()
	needCloudpickle(t)
	w := newSSHWorld(t, []string{"hostA", "hostB"}, sshtest.Options{})
	// The two hosts may reach each other (TestReachBetweenHosts: not without).
	w.WriteConfig(`{"hosts": {"host*": {"reach": ["host*"]}}}`)
	// Sessions here and there on one minor, so that code may cross.
	w.Setenv("REPLHUB_PYTHON", py(t, "3.11"))
	ok(t, w.Run("exec", "ra", "data = {'n': 41}", "--host", "hostA"))
	ok(t, w.Run("exec", "rb", "def inc(d):\n    return d['n'] + 1", "--host", "hostB"))
	// local to remote
	out := ok(t, w.Run("exec", "here", `ra = session("ra")
ra.get("data"), ra.call(lambda: sorted(globals())[:0])`))
	assert.Contains(t, out, "({'n': 41}, [])")
	// remote to remote, through this machine
	out = ok(t, w.Run("exec", "ra", `rb = session("rb")
rb, rb.call("inc", data), rb.call(lambda d: d["n"] * 2, data)`))
	assert.Contains(t, out, "<session 'rb' on hostB, python 3.")
	assert.Contains(t, out, ", 42, 82)")
	// a remote session opens another on a host it may reach by name and host
	out = ok(t, w.Run("exec", "ra", `other = session("rc", host="hostB"); other.put(v=5); other.get("v")`))
	assert.Contains(t, out, "5")
	r := w.Run("sessions")
	assert.Contains(t, r.Stdout, "rc  on hostB")
}

func TestObjectsUserToRoot(t *testing.T) {
	t.Parallel()
	needCloudpickle(t)
	f := newFakeSudo(t, "pw", "pw")
	e := hubtest.Start(t)
	f.apply(e, "password")
	e.Setenv("REPLHUB_PYTHON", py(t, "3.11"))
	out := ok(t, e.Run("exec", "u", `root = session("u").sudo() if False else session("ops", sudo=True)
root, root.call(lambda: 6 * 7)`))
	assert.Contains(t, out, "<session 'ops' here as root, python 3.11")
	assert.Contains(t, out, "42)")
	assert.Equal(t, 1, f.askpassCalls(), "opening a root session from a session asks through $SUDO_ASKPASS once")
	out = ok(t, e.Run("exec", "u", `twin = session("u2"); twin.sudo()`))
	assert.Contains(t, out, "<session 'u2.root' here as root")
	assert.Contains(t, ok(t, e.Run("sessions")), "u2.root  as root")
}

// Functions from a user module go by reference: they need no cloudpickle
// and cross Python versions, since only their name travels.
func TestObjectsUserModulesByReference(t *testing.T) {
	t.Parallel()
	w := newSSHWorld(t, []string{"lab"}, sshtest.Options{})
	mods := w.Paths.Modules()
	require.NoError(t, os.MkdirAll(mods, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(mods, "mytools.py"), []byte("def triple(x):\n    return 3 * x\n"), 0o600))
	ok(t, w.Run("exec", "p36", "1", "--python", py(t, "3.6")))
	ok(t, w.Run("exec", "far", "1", "--host", "lab", "--python", py(t, "3.12")))
	out := ok(t, w.Run("exec", "p311", `from replhub import mytools
session("p36").call(mytools.triple, 2), session("far").call(mytools.triple, 5)`, "--python", py(t, "3.11")))
	assert.Contains(t, out, "(6, 15)")
	out = ok(t, w.Run("exec", "far", "import replhub.mytools, sys; replhub.mytools.__file__"))
	assert.Contains(t, out, filepath.Join(mods, "mytools.py"), "sent from this machine, nothing installed there")
}
