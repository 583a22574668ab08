package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/client"
	"github.com/replhub/replhub/tests/hubtest"
	"github.com/replhub/replhub/tests/sshtest"
	"github.com/replhub/replhub/wire"
)

// answerJSON runs a query command with --json and decodes its answer.
func answerJSON(t *testing.T, e *hubtest.Env, args ...string) (wire.Answer, hubtest.Result) {
	t.Helper()
	r := e.Run(append(args, "--json")...)
	var a wire.Answer
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &a), "%s", r)
	return a, r
}

// cells counts the session's cells, as sessions --json says.
func cells(t *testing.T, e *hubtest.Env, name string) int {
	t.Helper()
	return sessionInfo(t, e, name).Cells
}

// sessionInfo is what sessions --json says of a live session.
func sessionInfo(t *testing.T, e *hubtest.Env, name string) wire.SessionInfo {
	t.Helper()
	l := sessionList(t, e)
	if s := liveOf(l, name); s != nil {
		return *s
	}
	t.Fatalf("no session %q: %+v", name, l)
	return wire.SessionInfo{}
}

// busyCell starts a cell that runs in the background of the test until
// it is ended, and returns once it runs. The cell sets slept.
func busyCell(t *testing.T, e *hubtest.Env, name string) busy {
	t.Helper()
	dir := t.TempDir()
	b := busy{t: t, gate: filepath.Join(dir, "gate"), armed: filepath.Join(dir, "armed")}
	r := e.Run("exec", name, b.code(), "-t", "0.2")
	require.Equal(t, 3, r.Code, "%s", r)
	return b
}

// busy is a cell that runs until its gate opens or, once armed, until a
// query waits for it.
type busy struct {
	t           *testing.T
	gate, armed string
}

// code is the cell: it polls its gate, and once armed, looks for a
// thread in the toolkit's query.answer (which waits for the cell), then
// runs 0.6 s more, so that the query waits that long. It makes no name
// but slept.
func (b busy) code() string {
	return fmt.Sprintf(`import os, time
while not os.path.exists(%q):
    if os.path.exists(%q) and any(f.f_code.co_name == "answer" and "query" in f.f_code.co_filename
            for top in __import__("sys")._current_frames().values() for f, _ in __import__("traceback").walk_stack(top)):
        time.sleep(0.6)
        break
    time.sleep(0.02)
slept = True`, b.gate, b.armed)
}

// end lets the cell finish now.
func (b busy) end() { openGate(b.t, b.gate) }

// endOnceAsked lets the cell finish 0.6 s after a query waits for it:
// the next query waits for the cell, however long it takes to arrive.
func (b busy) endOnceAsked() { openGate(b.t, b.armed) }

func TestVarsCommand(t *testing.T) {
	t.Parallel()
	pythons(t, func(t *testing.T, py string) {
		e := hubtest.Start(t)
		ok(t, e.Run("exec", "v", "import json\ncfg = {'port': 8080}\n_hidden = 1\nbig = 'x' * 10**6\n40 + 2", "--python", py))
		transcript, _ := os.ReadFile(e.Paths.Transcript("v"))
		out := ok(t, e.Run("vars", "v"))
		assert.Regexp(t, `(?m)^cfg\s+dict\s+\{'port': 8080\}$`, out)
		assert.Regexp(t, `(?m)^json\s+module\s+<module 'json'`, out)
		assert.Contains(t, out, "[2 names starting with _ not shown: --all shows them]")
		assert.NotContains(t, out, "grep")
		assert.Less(t, len(out), 2000, "a big value's repr is capped")

		a, _ := answerJSON(t, e, "vars", "v", "--all")
		var names []string
		for _, v := range a.Vars {
			names = append(names, v.Name)
		}
		assert.Equal(t, []string{"_", "_hidden", "big", "cfg", "json"}, names)
		assert.Equal(t, "vars", a.Kind)

		// Looking changed nothing: no cell, the same _, the same transcript.
		assert.Equal(t, 1, cells(t, e, "v"))
		assert.Contains(t, ok(t, e.Run("exec", "v", "_")), "Out[2]: 42")
		after, _ := os.ReadFile(e.Paths.Transcript("v"))
		assert.Equal(t, string(transcript)+"\n", string(after[:len(transcript)+1]))
		assert.NotContains(t, string(after), "vars")

		// 10,000 names: the reply is capped and says how many it left out.
		ok(t, e.Run("exec", "v", "for i in range(10000): globals()['n%05d' % i] = i"))
		out = ok(t, e.Run("vars", "v", "--limit", "20"))
		assert.Contains(t, out, "[9984 of 10004 names not shown")
		assert.Equal(t, 20+2, strings.Count(out, "\n"))

		// A busy session: wait for its cell, or say it runs.
		cell := busyCell(t, e, "v")
		r := e.Run("vars", "v", "--wait", "0")
		assert.Equal(t, 2, r.Code, "%s", r)
		assert.Contains(t, r.Stderr, "session 'v' is busy: cell 4 is running (did not wait); try again, or wait longer for it (--wait SECONDS)")
		cell.endOnceAsked()
		a, r = answerJSON(t, e, "vars", "v", "--wait", "20", "--limit", "3")
		assert.Equal(t, 0, r.Code, "%s", r)
		assert.Equal(t, 4, a.WaitedFor)
		assert.Greater(t, a.WaitedMS, int64(500))
		out = ok(t, e.Run("vars", "v", "--limit", "3"))
		assert.NotContains(t, out, "waited")

		r = e.Run("vars", "nobody")
		assert.Equal(t, 2, r.Code)
		assert.Contains(t, r.Stderr, "no session 'nobody'")
	})
}

func TestInspectCommand(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	newer, _ := hubtest.PickPythons(t)
	e.Setenv("REPLHUB_PYTHON", newer)
	ok(t, e.Run("exec", "i", `
import os
def area(w, h=1):
    """Area of a rectangle.

    Width times height."""
    return w * h
class Grid:
    def __init__(self):
        self.shape = (3, 4)
        self.dtype = "float32"
        self.cells = [0] * 12
    def __len__(self):
        return 12
    def __repr__(self):
        while True:
            pass
    def fill(self, v):
        pass
g = Grid()
`))
	out := ok(t, e.Run("inspect", "i", "area"))
	for _, want := range []string{"area: function", "signature: (w, h=1)", "defined in: <cell-1>, line 3", "  Area of a rectangle.", "  Width times height."} {
		assert.Contains(t, out, want)
	}
	t0 := time.Now()
	a, r := answerJSON(t, e, "inspect", "i", "g")
	assert.Equal(t, 0, r.Code, "%s", r)
	assert.Less(t, time.Since(t0), 10*time.Second, "a repr that never ends is stopped")
	require.NotNil(t, a.Inspect)
	assert.Equal(t, "__main__.Grid", a.Inspect.Type)
	assert.Contains(t, a.Inspect.Repr, "took over")
	require.NotNil(t, a.Inspect.Len)
	assert.EqualValues(t, 12, *a.Inspect.Len)
	assert.Equal(t, "(3, 4)", a.Inspect.Shape)
	assert.Equal(t, "float32", a.Inspect.Dtype)
	assert.Contains(t, a.Inspect.Attrs, "fill()")
	assert.Contains(t, a.Inspect.Attrs, "cells")

	out = ok(t, e.Run("inspect", "i", "os.path"))
	assert.Contains(t, out, "os.path: module")
	assert.Contains(t, out, "join()")

	r = e.Run("inspect", "i", "missing.attr")
	assert.Equal(t, 1, r.Code, "an expression that raises exits as a cell that raised: %s", r)
	assert.Contains(t, r.Stdout, "NameError: name 'missing' is not defined")
	assert.Equal(t, 1, cells(t, e, "i"))

	cell := busyCell(t, e, "i")
	r = e.Run("inspect", "i", "area", "--wait", "0.1")
	assert.Equal(t, 2, r.Code, "%s", r)
	assert.Contains(t, r.Stderr, "cell 2 is running (waited 0.1s)")
	cell.endOnceAsked()
	out = ok(t, e.Run("inspect", "i", "slept", "--wait", "20"))
	assert.Contains(t, out, "[waited ")
	assert.Contains(t, out, "for cell 2 to finish]")
	assert.Contains(t, out, "slept: bool")
}

func TestCompleteCommand(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	newer, _ := hubtest.PickPythons(t)
	e.Setenv("REPLHUB_PYTHON", newer)
	ok(t, e.Run("exec", "c", "import os\nconfig = {'port': 1, 'path': 2}\nconfirm = True"))
	for _, c := range []struct{ text, want string }{
		{"conf", "config\nconfirm\n"},
		{`config["pa`, `config["path"]` + "\n"},
		{"import js", "import json\n"},
		{"from os import getcw", "from os import getcwd\nfrom os import getcwdb\n"},
		{"os.path.jo", "os.path.join(\n"},
	} {
		assert.Equal(t, c.want, ok(t, e.Run("complete", "c", c.text)), "%q", c.text)
	}
	a, _ := answerJSON(t, e, "complete", "c", "os.", "--limit", "5")
	assert.Len(t, a.Completions, 5)
	assert.Greater(t, a.Left, 100)
	assert.Equal(t, "no completions\n", ok(t, e.Run("complete", "c", "zzz")))

	cell := busyCell(t, e, "c")
	r := e.Run("complete", "c", "conf", "--wait", "0")
	assert.Equal(t, 2, r.Code, "%s", r)
	assert.Contains(t, r.Stderr, "is busy: cell 2 is running")
	cell.endOnceAsked()
	a, r = answerJSON(t, e, "complete", "c", "sle", "--wait", "20")
	assert.Equal(t, 0, r.Code, "%s", r)
	assert.Equal(t, []string{"slept"}, a.Completions)
	assert.Equal(t, 2, a.WaitedFor)
}

func TestResetCommand(t *testing.T) {
	t.Parallel()
	pythons(t, func(t *testing.T, py string) {
		e := hubtest.Start(t)
		out := ok(t, e.Run("exec", "r", "import os, json\nimport os as o2\nx = 1\nread = 'mine'\nimport time\npid = os.getpid(); pid", "--python", py))
		pid := strings.TrimSpace(out[strings.Index(out, ": ")+2:])

		cell := busyCell(t, e, "r")
		r := e.Run("reset", "r")
		assert.Equal(t, 2, r.Code, "%s", r)
		assert.Contains(t, r.Stderr, "session 'r' is busy (cell 2 has run for")
		assert.Contains(t, r.Stderr, "reset refuses a busy session: `replhub wait r` waits for the cell, `replhub interrupt r` stops it")
		cell.end()
		ok(t, e.Run("wait", "r", "-t", "20"))

		a, r := answerJSON(t, e, "reset", "r", "--keep-imports")
		assert.Equal(t, 0, r.Code, "%s", r)
		assert.Equal(t, []string{"json", "o2", "os", "time"}, a.Kept)
		assert.Equal(t, []string{"read"}, a.Restored)
		assert.Equal(t, 4, a.Removed, "x, pid, _ and slept")

		out = ok(t, e.Run("exec", "r", "os.getpid(), json.dumps(1), callable(read)"))
		assert.Contains(t, out, fmt.Sprintf("(%s, '1', True)", pid), "the same process, its imports and the toolkit")
		r = e.Run("exec", "r", "x")
		assert.Contains(t, r.Stdout, "NameError")

		out = ok(t, e.Run("reset", "r"))
		assert.Equal(t, "reset session 'r': 5 names removed\n", out)
		r = e.Run("sessions", "r")
		assert.NotContains(t, r.Stdout, "names:")
		transcript, _ := os.ReadFile(e.Paths.Transcript("r"))
		assert.Contains(t, string(transcript), "# ---- reset: the user's names were cleared, modules kept")
		assert.Equal(t, 4, cells(t, e, "r"), "a reset is no cell")
	})
}

// The same frames travel over ssh: a session on a host answers too.
func TestVarsInspectCompleteResetRemote(t *testing.T) {
	t.Parallel()
	w := newSSHWorld(t, []string{"lab"}, sshtest.Options{})
	ok(t, w.Run("exec", "far", "import json\ndata = {'k': [1, 2]}", "--host", "lab"))
	assert.Regexp(t, `(?m)^data\s+dict\s+\{'k': \[1, 2\]\}$`, ok(t, w.Run("vars", "far")))
	assert.Contains(t, ok(t, w.Run("inspect", "far", "json.dumps")), "signature: (obj, *,")
	assert.Equal(t, `data["k"]`+"\n", ok(t, w.Run("complete", "far", `data["`)))
	assert.Contains(t, ok(t, w.Run("reset", "far")), "2 names removed")
	assert.Contains(t, ok(t, w.Run("vars", "far")), "has no names of its user")
}

// complete on an idle session, end to end through the client package.
func TestCompleteLatency(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	newer, _ := hubtest.PickPythons(t)
	e.Setenv("REPLHUB_PYTHON", newer)
	ok(t, e.Run("exec", "fast", "import os\nconfig = 1"))
	c := e.Client()
	ctx := context.Background()
	var ds []time.Duration
	for i := 0; i < 200; i++ {
		t0 := time.Now()
		a, err := c.Complete(ctx, "fast", "os.pa", client.QueryOptions{})
		require.NoError(t, err)
		require.Contains(t, a.Completions, "os.path")
		ds = append(ds, time.Since(t0))
	}
	med := median(ds)
	t.Logf("complete, idle session, through the client: median %s", med)
	if !hubtest.Race {
		assert.Less(t, med, 5*time.Millisecond)
	}
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
