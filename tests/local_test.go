package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/tests/hubtest"
	"github.com/replhub/replhub/wire"
)

// pythons runs f once with a recent and once with an old interpreter.
func pythons(t *testing.T, f func(t *testing.T, py string)) {
	newer, older := hubtest.PickPythons(t)
	for _, py := range []string{newer, older} {
		t.Run(filepath.Base(py), func(t *testing.T) {
			t.Parallel()
			f(t, py)
		})
	}
}

// jsonResult runs replhub with args, which ask for --json, and decodes
// the result it prints.
func jsonResult(t *testing.T, e *hubtest.Env, args ...string) (wire.Result, hubtest.Result) {
	t.Helper()
	r := e.Run(args...)
	var res wire.Result
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &res), "%s", r)
	return res, r
}

func TestSessionKeepsState(t *testing.T) {
	t.Parallel()
	pythons(t, func(t *testing.T, py string) {
		e := hubtest.Start(t)
		r := e.Run("exec", "chirp", `import json; cfg = {"port": 8080}`, "--python", py)
		require.Equal(t, 0, r.Code, "%s", r)
		assert.Regexp(t, `^\[created session 'chirp' \(python 3\.\d+\.\d+, cwd `+regexp.QuoteMeta(e.Cwd)+`\)\]\n$`, r.Stdout)

		r = e.Run("exec", "chirp", `cfg["port"] + 1`)
		require.Equal(t, 0, r.Code, "%s", r)
		assert.Equal(t, "Out[2]: 8081\n", r.Stdout)

		r = e.Run("exec", "chirp", "-")
		assert.Equal(t, 0, r.Code, "empty stdin is an empty cell: %s", r)
		r = e.RunInput("x = cfg['port']\nx * 2\n", "exec", "chirp", "-")
		assert.Equal(t, "Out[4]: 16160\n", r.Stdout, "%s", r)
		// Its done frame does not list the names, which did not change:
		// the hub keeps those it had.
		r = e.Run("exec", "chirp", "x += 1")
		require.Equal(t, 0, r.Code, "%s", r)

		r = e.Run("sessions")
		require.Equal(t, 0, r.Code, "%s", r)
		assert.Regexp(t, `(?m)^chirp  pid \d+  python 3\.\d+\.\d+  up \S+  idle \S+  5 cells  \d+ MB  cwd `+regexp.QuoteMeta(e.Cwd)+`\n    names: cfg, json, x\n`, r.Stdout)

		r = e.Run("sessions", "chirp")
		assert.Contains(t, r.Stdout, "transcript: "+e.Paths.Transcript("chirp"))
		assert.Equal(t, 2, e.Run("sessions", "nosuch").Code)
	})
}

func TestExecRunsInCallersCwdAndEnv(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	newer, _ := hubtest.PickPythons(t)
	e.Setenv("REPLHUB_TEST_MARK", "hello there")
	e.Setenv("REPLHUB_PYTHON", newer)
	r := e.Run("exec", "env", `import os, sys; (os.getcwd(), os.environ["REPLHUB_TEST_MARK"], sys.executable)`)
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "Out[1]: ('"+e.Cwd+"', 'hello there', '"+newer+"')")
	// A REPL's sys.path[0] is the cwd, so modules there import.
	require.NoError(t, os.WriteFile(filepath.Join(e.Cwd, "localmod.py"), []byte("VALUE = 7\n"), 0o644))
	r = e.Run("exec", "env", "import localmod; localmod.VALUE")
	assert.Contains(t, r.Stdout, "Out[2]: 7", "%s", r)
}

func TestREPLSemantics(t *testing.T) {
	t.Parallel()
	pythons(t, func(t *testing.T, py string) {
		e := hubtest.Start(t)
		run := func(code string) hubtest.Result {
			t.Helper()
			return e.Run("exec", "s", code, "--python", py)
		}
		r := run("6 * 7")
		assert.Contains(t, r.Stdout, "Out[1]: 42")
		r = run("_ + 1")
		assert.Contains(t, r.Stdout, "Out[2]: 43")
		r = run("None")
		assert.NotContains(t, r.Stdout, "Out[")

		// A real __main__: functions defined in a cell pickle.
		r = run("import pickle\ndef f(x):\n    return x + 1\npickle.loads(pickle.dumps(f))(1)")
		assert.Contains(t, r.Stdout, "Out[4]: 2", "%s", r)

		// print(), a subprocess and C-level writes keep their order.
		r = run(`import os, subprocess, sys
print("one")
subprocess.run(["echo", "two"])
os.write(1, b"three\n")
sys.stderr.write("four\n")
os.write(2, b"five\n")
print("six", flush=False)`)
		assert.Equal(t, "one\ntwo\nthree\nfour\nfive\nsix\n", r.Stdout)

		r = run("input()")
		assert.Equal(t, 1, r.Code)
		assert.Contains(t, r.Stdout, "EOFError")

		r = run("import sys; sys.exit(4)")
		assert.Equal(t, 1, r.Code)
		assert.Contains(t, r.Stdout, "SystemExit: sys.exit(4) was caught; the session goes on")
		r = run("'still here'")
		assert.Contains(t, r.Stdout, "Out[8]: 'still here'")

		r = run("def g():\n    return 1 / 0\n\ng()")
		assert.Equal(t, 1, r.Code)
		assert.Contains(t, r.Stdout, `File "<cell-9>", line 2, in g`)
		assert.Contains(t, r.Stdout, "    return 1 / 0")
		assert.Contains(t, r.Stdout, "ZeroDivisionError")
		assert.NotContains(t, r.Stdout, "worker.py")

		r = run("def (:")
		assert.Contains(t, r.Stdout, "SyntaxError")
		assert.Contains(t, r.Stdout, `File "<cell-10>", line 1`)
		assert.NotContains(t, r.Stdout, "worker.py")
	})
}

func TestJSONHasEveryField(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	// No session yet: an empty list, not null, for a program to read.
	r := e.Run("sessions", "--json")
	require.Equal(t, 0, r.Code, "%s", r)
	var empty map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &empty), "%s", r)
	assert.Equal(t, []any{}, empty["sessions"], "%s", r.Stdout)

	newer, _ := hubtest.PickPythons(t)
	res, r := jsonResult(t, e, "exec", "--json", "j", "print('hi'); 2 + 2", "--python", newer)
	assert.Equal(t, 0, r.Code)
	assert.Equal(t, "j", res.Session)
	assert.Equal(t, 1, res.Cell)
	assert.Equal(t, wire.StatusOK, res.Status)
	assert.Equal(t, "hi\n", res.Output)
	require.NotNil(t, res.Value)
	assert.Equal(t, "4", *res.Value)
	require.NotNil(t, res.Created)
	var raw map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &raw))
	for _, k := range []string{"session", "cell", "status", "output", "value", "error", "duration_ms", "truncated", "truncated_chars", "notes"} {
		assert.Contains(t, raw, k)
	}

	res, r = jsonResult(t, e, "exec", "--json", "j", "raise ValueError('bad')")
	assert.Equal(t, 1, r.Code)
	assert.Equal(t, wire.StatusError, res.Status)
	require.NotNil(t, res.Error)
	assert.Equal(t, "ValueError", res.Error.Type)
	assert.Equal(t, "bad", res.Error.Message)
	assert.Contains(t, res.Error.Traceback, "<cell-2>")
	raw = nil
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &raw))
	assert.Equal(t, []any{}, raw["notes"], "no notes: a list all the same\n%s", r.Stdout)

	r = e.Run("sessions", "--json")
	var l wire.SessionList
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &l), "%s", r)
	assert.Equal(t, "detached", l.Hub.Supervisor)
	assert.Equal(t, "none", l.Hub.MemoryLimit)
	require.Len(t, l.Sessions, 1)
	assert.Equal(t, "idle", l.Sessions[0].State)
	assert.Equal(t, 2, l.Sessions[0].Cells)
	assert.Greater(t, l.Sessions[0].RSS, int64(1<<20))
}

func TestTimeoutWaitAndBusy(t *testing.T) {
	t.Parallel()
	pythons(t, func(t *testing.T, py string) {
		e := hubtest.Start(t)
		gate := filepath.Join(t.TempDir(), "gate")
		r := e.Run("exec", "slow", fmt.Sprintf("import os, time\nprint('started')\nwhile not os.path.exists(%q): time.sleep(0.02)\n'finished'", gate), "-t", "0.5", "--python", py)
		assert.Equal(t, 3, r.Code, "%s", r)
		assert.Contains(t, r.Stdout, "started")
		assert.Contains(t, r.Stdout, "[cell 1 still running after")

		r = e.Run("exec", "slow", "1")
		assert.Equal(t, 2, r.Code)
		assert.Regexp(t, `session 'slow' is busy: cell 1 has run for \S+`, r.Stderr)

		r = e.Run("sessions")
		assert.Regexp(t, `running for \S+ \(cell 1\)`, r.Stdout)

		openGate(t, gate)
		r = e.Run("wait", "slow", "-t", "20")
		assert.Equal(t, 0, r.Code, "%s", r)
		assert.Equal(t, "Out[1]: 'finished'\n", r.Stdout)

		r = e.Run("wait", "slow")
		assert.Contains(t, r.Stdout, "is idle: nothing to collect")

		// A result that finished while nobody waited is shown by the next exec.
		e.Run("exec", "slow", "time.sleep(1); 'late'", "-t", "0.2")
		require.Eventually(t, func() bool {
			l, err := e.Client().Sessions(context.Background())
			if err != nil {
				return false
			}
			for _, s := range l.Sessions {
				if s.Name == "slow" {
					return s.State == "idle" && s.Unread
				}
			}
			return false
		}, 10*time.Second, 50*time.Millisecond)
		r = e.Run("exec", "slow", "'next'")
		assert.Contains(t, r.Stdout, "Out[2]: 'late'")
		assert.Contains(t, r.Stdout, "Out[3]: 'next'")

		assert.Equal(t, 2, e.Run("exec", "slow", "1", "-t", "601").Code)
		assert.Equal(t, 2, e.Run("exec", "slow", "1", "-t", "0").Code)
	})
}

func TestInterrupt(t *testing.T) {
	t.Parallel()
	pythons(t, func(t *testing.T, py string) {
		e := hubtest.Start(t)
		for _, code := range []string{"import time; time.sleep(60)", "import subprocess; subprocess.run(['sleep', '60'])", "while True: pass"} {
			r := e.Run("exec", "i", code, "-t", "0.5", "--python", py)
			require.Equal(t, 3, r.Code, "%s", r)
			r = e.Run("interrupt", "i")
			require.Equal(t, 0, r.Code, "%s", r)
			r = e.Run("wait", "i", "-t", "10")
			assert.Equal(t, 1, r.Code, "%s", r)
			assert.Contains(t, r.Stdout, "KeyboardInterrupt", code)
		}
		r := e.Run("interrupt", "i")
		assert.Contains(t, r.Stdout, "is idle: nothing to interrupt")
		r = e.Run("exec", "i", "'alive'")
		assert.Contains(t, r.Stdout, "'alive'")
	})
}

func TestKillFreesTheName(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	newer, _ := hubtest.PickPythons(t)
	res, _ := jsonResult(t, e, "exec", "--json", "k", "import os, subprocess; p = subprocess.Popen(['sleep', '300']); x = 1; (os.getpid(), p.pid)", "--python", newer)
	var pids [2]int
	require.NoError(t, json.Unmarshal([]byte(strings.NewReplacer("(", "[", ")", "]").Replace(*res.Value)), &pids))
	r := e.Run("kill", "k")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "killed session 'k'")
	assert.True(t, hubtest.WaitGone(pids[0], 5*time.Second), "worker still alive")
	assert.True(t, hubtest.WaitGone(pids[1], 5*time.Second), "the worker's child still alive")

	r = e.Run("exec", "k", "x", "--python", newer)
	assert.Equal(t, 1, r.Code)
	assert.Contains(t, r.Stdout, "NameError")
	assert.NotContains(t, r.Stdout, "died", "a kill writes no death note")
	assert.Equal(t, 2, e.Run("kill", "nosuch").Code)
}

func TestCaps(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	newer, _ := hubtest.PickPythons(t)
	res, _ := jsonResult(t, e, "exec", "--json", "c", `print("a" * 20000 + "b" * 20000 + "c" * 20000)`, "--python", newer)
	assert.True(t, res.Truncated)
	assert.Equal(t, 60001-30000, res.TruncatedChars)
	assert.True(t, strings.HasPrefix(res.Output, strings.Repeat("a", 15000)))
	assert.True(t, strings.HasSuffix(res.Output, strings.Repeat("c", 14999)+"\n"))
	assert.Contains(t, res.Output, "[... 30001 characters left out ...]")
	assert.Less(t, len(res.Output), 30100)

	res, _ = jsonResult(t, e, "exec", "--json", "c", `"x" * 50000`)
	require.NotNil(t, res.Value)
	assert.LessOrEqual(t, len(*res.Value), 10100)
	assert.Contains(t, *res.Value, "characters left out")

	// More unread output than a session keeps: the oldest goes, with a note.
	res, _ = jsonResult(t, e, "exec", "--json", "c", `import sys
for i in range(30):
    sys.stdout.write(str(i % 10) * 100000)
print()`)
	assert.True(t, res.Truncated)
	assert.Contains(t, strings.Join(res.Notes, "\n"), "characters of unread output were dropped (a session keeps at most 2000000)")
}

func TestOthersLine(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	newer, _ := hubtest.PickPythons(t)
	e.Setenv("REPLHUB_PYTHON", newer)
	gate := filepath.Join(t.TempDir(), "gate")
	e.Run("exec", "busy", fmt.Sprintf("import os, time\nwhile not os.path.exists(%q): time.sleep(0.02)\n'done'", gate), "-t", "0.2")
	r := e.Run("exec", "other", "1")
	assert.Regexp(t, `\[other sessions: busy running cell 1 for \S+\]`, r.Stdout)
	openGate(t, gate)
	assert.Eventually(t, func() bool {
		r = e.Run("exec", "other", "2")
		return strings.Contains(r.Stdout, "[other sessions: busy has an unread result (`replhub wait busy`)]")
	}, 10*time.Second, 100*time.Millisecond, "%s", r)
	e.Run("wait", "busy")
	r = e.Run("exec", "other", "3")
	assert.NotContains(t, r.Stdout, "other sessions")
}

func TestTranscript(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	newer, _ := hubtest.PickPythons(t)
	e.Run("exec", "tr", "a = 1", "--python", newer)
	e.Run("exec", "tr", "print(a)\nb = 2")
	b, err := os.ReadFile(e.Paths.Transcript("tr"))
	require.NoError(t, err)
	assert.Regexp(t, `(?s)# ---- cell 1 · \d{4}-\d\d-\d\dT\S+ · cwd `+regexp.QuoteMeta(e.Cwd)+`\na = 1\n.*# ---- cell 2 · .*\nprint\(a\)\nb = 2\n`, string(b))
	fi, err := os.Stat(e.Paths.Transcript("tr"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	di, err := os.Stat(e.Paths.State)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), di.Mode().Perm())
}

func TestDeathsAreReported(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, code, how string
	}{
		{"exit", "import os; print('bye'); os._exit(3)", "exited with status 3"},
		{"sigkill", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)", "killed by signal SIGKILL"},
		{"segfault", "import ctypes; ctypes.string_at(0)", "killed by signal SIGSEGV"},
	}
	pythons(t, func(t *testing.T, py string) {
		e := hubtest.Start(t)
		for _, c := range cases {
			e.Run("exec", c.name, "x = 1", "--python", py)
			r := e.Run("exec", c.name, c.code)
			assert.Equal(t, 4, r.Code, "%s", r)
			assert.Contains(t, r.Stdout, "died while running cell 2: "+c.how)

			r = e.Run("wait", c.name)
			assert.Equal(t, 2, r.Code)
			assert.Contains(t, r.Stderr, c.how)
			r = e.Run("interrupt", c.name)
			assert.Contains(t, r.Stderr, c.how)
			r = e.Run("sessions")
			assert.Contains(t, r.Stdout, c.name+"  dead: ")

			r = e.Run("exec", c.name, "'again'", "--python", py)
			assert.Equal(t, 0, r.Code, "%s", r)
			assert.Contains(t, r.Stdout, "[session '"+c.name+"' died at ")
			assert.Contains(t, r.Stdout, c.how+", after 2 cells; transcript "+e.Paths.Transcript(c.name))
			assert.Contains(t, r.Stdout, "Out[1]: 'again'")
			r = e.Run("exec", c.name, "'once'")
			assert.NotContains(t, r.Stdout, "died", "a death note is shown once")
		}
		// The exit case's last words are in its note.
		e.Run("exec", "words", "import sys; sys.stderr.write('last words\\n'); import os; os._exit(1)", "--python", py)
		r := e.Run("exec", "words", "1", "--python", py)
		assert.Contains(t, r.Stdout, "its last output:\n    last words")
		// The hub still serves.
		assert.Equal(t, 0, e.Run("sessions").Code)
	})
}

func TestHubStopLeavesDeathNotes(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	e.WriteConfig(`{"swap_after_hours": 0}`) // else a stop swaps them (swap_test.go)
	newer, _ := hubtest.PickPythons(t)
	res, _ := jsonResult(t, e, "exec", "--json", "victim", "import os; os.getpid()", "--python", newer)
	// A call that waits on a cell as the hub stops hears so, in words.
	require.Equal(t, 0, e.Run("exec", "waiter", "import time", "--python", newer).Code)
	waited := make(chan hubtest.Result, 1)
	go func() { waited <- e.Run("exec", "waiter", "print('waiting', flush=True); time.sleep(60)", "-t", "120") }()
	for deadline := time.Now().Add(30 * time.Second); ; {
		if l := sessionList(t, e); slices.ContainsFunc(l.Sessions, func(s wire.SessionInfo) bool { return s.Name == "waiter" && s.RunningCell == 2 }) {
			break
		}
		require.True(t, time.Now().Before(deadline), "the waiter's cell did not start")
		time.Sleep(20 * time.Millisecond)
	}
	r := e.Run("stop")
	require.Equal(t, 0, r.Code, "%s", r)
	w := <-waited
	assert.Equal(t, 2, w.Code, "%s", w)
	assert.Contains(t, w.Stderr, "replhub: the hub stopped while this call waited on session 'waiter': `replhub wait waiter` (which starts a hub) shows what became of its cell", "%s", w)
	pid := 0
	json.Unmarshal([]byte(*res.Value), &pid)
	assert.True(t, hubtest.WaitGone(pid, 5*time.Second))
	_, err := os.Stat(e.Paths.Socket())
	assert.True(t, os.IsNotExist(err), "socket removed")
	r = e.Run("exec", "victim", "1", "--python", newer)
	assert.Contains(t, r.Stdout, "the hub stopped")
	r = e.Run("stop")
	assert.Equal(t, 0, r.Code)
	assert.Contains(t, r.Stdout, "hub stopping")
	r = e.Run("stop")
	assert.Contains(t, r.Stdout, "no hub was running")
}

// A cell that finished while nobody waited comes first in the next exec's
// reply: in --json, apart from that exec's own output and value.
func TestEarlierResultApartInJSON(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	newer, _ := hubtest.PickPythons(t)
	r := e.Run("exec", "early", "import time; time.sleep(1); print('later'); 'c1'", "-t", "0.2", "--python", newer)
	require.Equal(t, 3, r.Code, "%s", r)
	for deadline := time.Now().Add(30 * time.Second); sessionInfo(t, e, "early").State != "idle"; {
		require.True(t, time.Now().Before(deadline), "cell 1 did not finish")
		time.Sleep(50 * time.Millisecond)
	}
	res, r := jsonResult(t, e, "exec", "--json", "early", "print('mine'); 2")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Equal(t, "mine\n", res.Output)
	assert.Equal(t, "mine\n", res.Stdout)
	require.NotNil(t, res.Value)
	assert.Equal(t, "2", *res.Value)
	require.NotNil(t, res.Earlier, "%s", r.Stdout)
	assert.Equal(t, 1, res.Earlier.Cell)
	assert.Equal(t, "later\n", res.Earlier.Output)
	require.NotNil(t, res.Earlier.Value)
	assert.Equal(t, "'c1'", *res.Earlier.Value)
	assert.Contains(t, res.Notes[0], "cell 1 finished while nobody waited; its reply comes first")
	require.Equal(t, 0, e.Run("kill", "early").Code)
}

func TestHubStartsOnFirstUseAndLogs(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	r := e.Run("start")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "hub running: pid")
	assert.Contains(t, r.Stdout, "detached")
	fi, err := os.Stat(e.Paths.Runtime)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	b, err := os.ReadFile(e.Paths.Log())
	require.NoError(t, err)
	assert.Contains(t, string(b), "hub serving")
	assert.Contains(t, string(b), "supervisor=detached")
}

func TestBadNames(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	for _, name := range []string{"a b", "..", strings.Repeat("x", 65), "a/b", "é"} {
		r := e.Run("exec", name, "1")
		assert.Equal(t, 2, r.Code)
		assert.Contains(t, r.Stderr, "bad session name")
	}
	r := e.Run("exec", "missing-python", "1", "--python", "/no/such/python")
	assert.Equal(t, 2, r.Code)
	assert.Contains(t, r.Stderr, `python "/no/such/python": not found`)

	// An empty place (a script's unset variable) is refused, not taken
	// for this machine: through package early and through cobra alike.
	for _, args := range [][]string{
		{"exec", "s", "1", "--host", ""}, {"exec", "s", "1", "--hosts="}, {"exec", "s", "1", "--python", ""},
		{"run", "1", "--host="}, {"run", "1", "--python", "", "--"},
	} {
		r := e.Run(args...)
		assert.Equal(t, 2, r.Code, "%q: %s", args, r)
		assert.Regexp(t, `^replhub: --(host|hosts|python) is empty: give `, r.Stderr, "%q", args)
	}
	// --cell 0 names no cell: refused, not taken for any cell.
	for _, args := range [][]string{{"wait", "s", "--cell", "0"}, {"wait", "s", "--cell=0", "--json"}, {"interrupt", "s", "--cell", "0"}} {
		r := e.Run(args...)
		assert.Equal(t, 2, r.Code, "%q: %s", args, r)
		assert.Equal(t, "replhub: --cell takes a cell number, 1 or more\n", r.Stderr, "%q", args)
	}
	assert.Contains(t, e.Run("sessions").Stdout, "no sessions", "none was made")
}

// The worker runs on every Python 3.6+ this machine has.
func TestEveryPython(t *testing.T) {
	t.Parallel()
	ps := hubtest.Pythons()
	if len(ps) == 0 {
		t.Skip("no Pythons found")
	}
	e := hubtest.Start(t)
	src := filepath.Join(e.Dir, "file.bin")
	sum := randomFile(t, src, 600<<10+3)
	for v, py := range ps {
		name := "v" + strings.ReplaceAll(v, ".", "_")
		r := e.Run("exec", name, "import sys\ndef f(x):\n    return x * 2\n'%d.%d' % sys.version_info[:2], f(21)", "--python", py)
		assert.Equal(t, 0, r.Code, "%s: %s", v, r)
		assert.Contains(t, r.Stdout, fmt.Sprintf("Out[1]: ('%s', 42)", v), v)
		r = e.Run("exec", name, "1/0")
		assert.Contains(t, r.Stdout, "ZeroDivisionError", v)
		assert.NotContains(t, r.Stdout, "worker.py", v)

		// A file in and back out, bigger than one write(2) piece; the
		// worker found sync_file_range to start writing it early.
		dest := filepath.Join(e.Dir, name+".bin")
		ok(t, e.Run("push", name, src, dest))
		assert.Equal(t, sum, sha(t, dest), v)
		back := filepath.Join(e.Dir, name+".back")
		ok(t, e.Run("pull", name, dest, back))
		assert.Equal(t, sum, sha(t, back), v)
		r = e.Run("exec", name, "import replhub_tk; replhub_tk._writeback")
		assert.Contains(t, r.Stdout, "<_FuncPtr object", v)
	}
}

// Where a systemd user manager runs, the hub is a transient unit with a
// memory ceiling. No user manager runs here, so a fake systemd-run stands in
// for it: it records its arguments and starts the command, as the real one's
// unit would; a failing one makes the client fall back to a detached hub.
func TestHubUnderSystemdRun(t *testing.T) {
	t.Parallel()
	for _, fails := range []bool{false, true} {
		t.Run(fmt.Sprintf("fails=%v", fails), func(t *testing.T) {
			e := hubtest.Start(t)
			bin := filepath.Join(e.Dir, "fakebin")
			require.NoError(t, os.Mkdir(bin, 0o755))
			args := filepath.Join(e.Dir, "systemd-run.args")
			script := "#!/bin/sh\nprintf '%s\\n' \"$@\" > " + args + "\n"
			if fails {
				script += "echo 'Failed to connect to bus' >&2\nexit 1\n"
			} else {
				script += "while [ \"${1#-}\" != \"$1\" ]; do case \"$1\" in -p) shift 2 ;; *) shift ;; esac; done\nsetsid \"$@\" </dev/null >/dev/null 2>&1 &\n"
			}
			require.NoError(t, os.WriteFile(filepath.Join(bin, "systemd-run"), []byte(script), 0o755))
			require.NoError(t, os.MkdirAll(filepath.Join(e.Runtime, "systemd"), 0o700))
			require.NoError(t, os.WriteFile(filepath.Join(e.Runtime, "systemd", "private"), nil, 0o600))
			e.Setenv("PATH", bin+":"+e.Getenv("PATH"))

			r := e.Run("sessions", "--json")
			require.Equal(t, 0, r.Code, "%s", r)
			var l wire.SessionList
			require.NoError(t, json.Unmarshal([]byte(r.Stdout), &l))
			b, err := os.ReadFile(args)
			require.NoError(t, err)
			assert.Contains(t, string(b), "--user\n")
			assert.Contains(t, string(b), "-p\nMemoryHigh=2G\n-p\nMemoryMax=3G\n")
			assert.Contains(t, string(b), "--setenv=XDG_RUNTIME_DIR="+e.Runtime+"\n")
			log, _ := os.ReadFile(e.Paths.Log())
			if fails {
				assert.Equal(t, "detached", l.Hub.Supervisor)
				assert.Contains(t, string(log), "systemd-run failed")
				assert.Contains(t, string(log), "starting a detached hub with no memory limit")
			} else {
				assert.Equal(t, "systemd", l.Hub.Supervisor)
				assert.Contains(t, l.Hub.MemoryLimit, "MemoryHigh=2G MemoryMax=3G")
				assert.Contains(t, string(log), "supervisor=systemd")
			}
		})
	}
}
