package boot

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ask sends a query frame and returns its answer.
func (w *worker) ask(q map[string]any) frame {
	w.t.Helper()
	w.qid++
	q["op"], q["id"] = "query", w.qid
	w.send(q, nil)
	id := int64(w.qid)
	f, _ := w.until("answer", 30*time.Second, func(f frame) bool { return f.num("id") == id })
	return f
}

func list(f frame, k string) []any { l, _ := f.h[k].([]any); return l }

func obj(f frame, k string) map[string]any { m, _ := f.h[k].(map[string]any); return m }

func TestQueryVars(t *testing.T) {
	eachPython(t, func(t *testing.T, py string) {
		w := startWorker(t, py)
		done := w.run("import json\ncfg = {'port': 8080}\n_private = 1\nread = 'mine'\ns = 'x' * 100000\n41 + 1", 20*time.Second)
		require.Equal(t, "ok", done.str("status"))
		a := w.ask(map[string]any{"kind": "vars"})
		require.Equal(t, true, a.h["ok"], "%s", a.line)
		got := map[string][2]string{}
		for _, v := range list(a, "vars") {
			m := v.(map[string]any)
			got[m["name"].(string)] = [2]string{m["type"].(string), m["repr"].(string)}
		}
		assert.Equal(t, [2]string{"dict", "{'port': 8080}"}, got["cfg"])
		assert.Equal(t, "module", got["json"][0])
		assert.Equal(t, [2]string{"str", "'mine'"}, got["read"], "a toolkit name the user rebound is the user's")
		assert.LessOrEqual(t, len(got["s"][1]), 100, "a repr is capped")
		assert.NotContains(t, got, "_private")
		assert.NotContains(t, got, "_", "_ names are hidden")
		assert.NotContains(t, got, "grep", "the toolkit is not the user's")
		assert.NotContains(t, got, "session")
		assert.EqualValues(t, 4, a.num("total"))
		assert.EqualValues(t, 2, a.num("hidden"))

		a = w.ask(map[string]any{"kind": "vars", "all": true})
		names := ""
		for _, v := range list(a, "vars") {
			names += v.(map[string]any)["name"].(string) + " "
		}
		assert.Equal(t, "_ _private cfg json read s ", names)

		// No cell was counted and _ did not change.
		done = w.run("_", 20*time.Second)
		assert.Equal(t, "42", done.str("value"))

		// Many names: the answer is capped and says how many it left out.
		w.run("for i in range(10000): globals()['v%05d' % i] = i", 60*time.Second)
		a = w.ask(map[string]any{"kind": "vars", "limit": 50})
		assert.Len(t, list(a, "vars"), 50)
		assert.EqualValues(t, 10005, a.num("total"))
		assert.EqualValues(t, 9955, a.num("left"))
		a = w.ask(map[string]any{"kind": "vars"})
		assert.Len(t, list(a, "vars"), 500)
		assert.Less(t, len(a.line), 100000)
	})
}

func TestQueryInspect(t *testing.T) {
	eachPython(t, func(t *testing.T, py string) {
		w := startWorker(t, py)
		done := w.run(`
import os
def add(a, b=1):
    """Add two numbers.

    More words."""
    return a + b
class Slow:
    shown = 0
    def __repr__(self):
        while True:
            pass
    @property
    def boom(self):
        raise RuntimeError("ran")
    def method(self):
        pass
slow = Slow()
nums = list(range(100000))
`, 20*time.Second)
		require.Equal(t, "ok", done.str("status"), "%s", done.line)

		a := w.ask(map[string]any{"kind": "inspect", "expr": "add"})
		in := obj(a, "inspect")
		require.NotNil(t, in, "%s", a.line)
		assert.Equal(t, "function", in["type"])
		assert.Equal(t, "(a, b=1)", in["signature"])
		assert.Equal(t, "Add two numbers.\n\nMore words.", in["doc"])
		assert.Equal(t, "<cell-1>", in["file"])
		assert.EqualValues(t, 3, in["line"])

		a = w.ask(map[string]any{"kind": "inspect", "expr": "nums"})
		in = obj(a, "inspect")
		assert.EqualValues(t, 100000, in["len"])
		assert.Less(t, len(in["repr"].(string)), 1000, "a big list shows its first items")
		assert.Nil(t, in["attrs"], "a built-in type's methods are not listed")

		a = w.ask(map[string]any{"kind": "inspect", "expr": "os"})
		in = obj(a, "inspect")
		assert.Equal(t, "module", in["kind"])
		assert.Contains(t, in["attrs"], "getcwd()")
		assert.Contains(t, in["attrs"], "path")

		// A repr that never ends is stopped; a property is not run.
		t0 := time.Now()
		a = w.ask(map[string]any{"kind": "inspect", "expr": "slow"})
		assert.Less(t, time.Since(t0), 8*time.Second)
		in = obj(a, "inspect")
		assert.Contains(t, in["repr"], "took over")
		assert.Contains(t, in["attrs"], "boom")
		assert.Contains(t, in["attrs"], "method()")
		assert.Contains(t, in["attrs"], "shown")

		a = w.ask(map[string]any{"kind": "inspect", "expr": "nope + 1"})
		assert.Equal(t, false, a.h["ok"])
		assert.Contains(t, a.str("error"), "NameError")
		a = w.ask(map[string]any{"kind": "inspect", "expr": "x = 1"})
		assert.Contains(t, a.str("error"), "not an expression")
		w.healthy()
	})
}

func TestQueryComplete(t *testing.T) {
	eachPython(t, func(t *testing.T, py string) {
		w := startWorker(t, py)
		w.run("import os\ncfg = {'port': 1, 'path': 2, 3: 4}\nconfig_x = 1", 20*time.Second)
		for _, c := range []struct {
			text string
			want []string
			not  []string
		}{
			{"cf", []string{"cfg"}, []string{"config_x"}},
			{"con", []string{"config_x", "continue"}, nil},
			{"x = os.pa", []string{"x = os.path", "x = os.pathsep"}, nil},
			{`cfg["p`, []string{`cfg["port"]`, `cfg["path"]`}, nil},
			{`cfg['po`, []string{`cfg['port']`}, nil},
			{"cfg[", []string{`cfg["port"]`, "cfg[3]"}, nil},
			{"import js", []string{"import json"}, nil},
			{"import os.pa", []string{"import os.path"}, nil},
			{"from os import pa", []string{"from os import path", "from os import pathsep"}, nil},
			{"from json import du", []string{"from json import dump", "from json import dumps"}, nil},
			{"from xml.dom import mini", []string{"from xml.dom import minidom"}, nil},
			{"from email import mess", []string{"from email import message", "from email import message_from_string"}, nil},
		} {
			a := w.ask(map[string]any{"kind": "complete", "text": c.text})
			require.Equal(t, true, a.h["ok"], "%s", a.line)
			var got []string
			for _, x := range list(a, "completions") {
				got = append(got, strings.TrimSuffix(x.(string), "("))
			}
			for _, x := range c.want {
				assert.Contains(t, got, x, "%q", c.text)
			}
			for _, x := range c.not {
				assert.NotContains(t, got, x, "%q", c.text)
			}
		}
		// Completing imported nothing it did not have.
		done := w.run("import sys; 'email.message' in sys.modules, 'xml.dom.minidom' in sys.modules", 20*time.Second)
		assert.Equal(t, "(False, False)", done.str("value"))
	})
}

func TestQueryBusyAndReset(t *testing.T) {
	eachPython(t, func(t *testing.T, py string) {
		w := startWorker(t, py)
		w.run("import json\nx = 1\nread = 2\ndef f(): pass", 20*time.Second)
		cell := w.exec("import time; time.sleep(1.5); y = 3")
		time.Sleep(200 * time.Millisecond)
		a := w.ask(map[string]any{"kind": "vars", "wait": 0.1})
		assert.Equal(t, true, a.h["busy"], "%s", a.line)
		assert.EqualValues(t, cell, a.num("cell"))
		a = w.ask(map[string]any{"kind": "reset", "wait": 10})
		assert.Equal(t, true, a.h["busy"], "reset never waits: %s", a.line)
		a = w.ask(map[string]any{"kind": "vars", "wait": 10})
		assert.Equal(t, true, a.h["ok"], "%s", a.line)
		assert.EqualValues(t, cell, a.num("cell"), "it says which cell it waited for")
		assert.Greater(t, a.h["waited"], 0.5)
		assert.Contains(t, string(a.line), `"name":"y"`)

		a = w.ask(map[string]any{"kind": "reset", "keep_imports": true})
		require.Equal(t, true, a.h["ok"], "%s", a.line)
		assert.EqualValues(t, 3, a.num("removed"), "x, f, y: %s", a.line)
		assert.Equal(t, []any{"json", "time"}, list(a, "kept"))
		assert.Equal(t, []any{"read"}, list(a, "restored"))
		done := w.run("x", 20*time.Second)
		assert.Equal(t, "NameError", done.errType())
		done = w.run("json.dumps(1), callable(read), callable(grep), callable(session)", 20*time.Second)
		assert.Equal(t, "('1', True, True, True)", done.str("value"))
		a = w.ask(map[string]any{"kind": "reset"})
		assert.EqualValues(t, 3, a.num("removed"), "json, time and _: %s", a.line)
		done = w.run("json", 20*time.Second)
		assert.Equal(t, "NameError", done.errType())

		// Modules kept under many long names, and one not a string: the
		// answer stays within a frame, and says how many it left out.
		w.run("import os; globals().update(('m%05d' % i + 'x' * 300, os) for i in range(6000)); globals()[7] = os; a = 1", 20*time.Second)
		a = w.ask(map[string]any{"kind": "reset", "keep_imports": true})
		require.Equal(t, true, a.h["ok"], "%.300s", a.line)
		kept := list(a, "kept")
		assert.Len(t, kept, 500)
		assert.Equal(t, "5502 more names of modules kept", a.h["note"], "os, 7 and 6,000 others, less 500")
		assert.Equal(t, 200, utf8.RuneCountInString(kept[1].(string)), "capped")
		assert.Equal(t, "7", kept[0])
	})
}

// A query holds the next cell back while it runs: user code never runs
// on two threads at once because of one.
func TestQueryHoldsTheNextCell(t *testing.T) {
	eachPython(t, func(t *testing.T, py string) {
		w := startWorker(t, py)
		w.run("import time\nclass R:\n    def __repr__(self):\n        time.sleep(0.05)\n        log.append('repr')\n        return 'R'\nlog = []\nrs = [R() for _ in range(10)]", 20*time.Second)
		w.wmu.Lock()
		q := fmt.Sprintf(`{"op":"query","id":1,"kind":"vars","limit":1}`+"\n"+`{"op":"query","id":2,"kind":"inspect","expr":"[(%s) for _ in range(1)]"}`+"\n", "rs")
		_, err := w.in.Write([]byte(q))
		w.wmu.Unlock()
		require.NoError(t, err)
		done := w.run("log.append('cell'); log", 30*time.Second)
		assert.Equal(t, "ok", done.str("status"), "%s", done.line)
		assert.True(t, strings.HasSuffix(done.str("value"), "'cell']"), "%s", done.str("value"))
	})
}

// check answers as Python's own REPL decides, and at once while a cell
// runs: it compiles the text, never runs it.
func TestQueryCheck(t *testing.T) {
	eachPython(t, func(t *testing.T, py string) {
		w := startWorker(t, py)
		w.send(map[string]any{"op": "exec", "cell": 1, "code": "import time; time.sleep(2)", "fence": "F1"}, nil)
		cases := map[string]string{
			"x = 1":                         "complete",
			"def f(a):":                     "incomplete",
			"def f(a):\n    return a":       "incomplete",
			"def f(a):\n    return a\n":     "complete",
			"(1,\n 2":                       "incomplete",
			"s = '''a":                      "incomplete",
			"x = = 1":                       "invalid",
			"for i in range(3): print(i)":   "incomplete",
			"for i in range(3): print(i)\n": "complete",
			"import os; os._exit(3)":        "complete",
		}
		start := time.Now()
		for text, want := range cases {
			a := w.ask(map[string]any{"kind": "check", "text": text})
			assert.Equal(t, want, a.str("check"), "%q: %s", text, a.line)
		}
		assert.Less(t, time.Since(start), 1500*time.Millisecond, "check does not wait for the running cell")
		done, _ := w.until("done", 20*time.Second, func(f frame) bool { return true })
		assert.Equal(t, "ok", done.str("status"), "nothing the check compiled ran")
	})
}

// A query that finds no thread to answer on (here the cell makes every
// thread's start fail, once the worker's own threads have started) is
// answered so at once, and gives its place back:
// more such queries than may run at once are each answered, and so is
// the one after the cell.
func TestQueryWithoutAThread(t *testing.T) {
	eachPython(t, func(t *testing.T, py string) {
		w := startWorker(t, py)
		started, release := filepath.Join(w.dir, "started"), filepath.Join(w.dir, "release")
		cell := w.exec(fmt.Sprintf("import os\n"+noThreadsLeft+
			"try:\n    open(%s, 'w').close()\n"+
			"    for _ in range(3000):\n        if os.path.exists(%s):\n            break\n        time.sleep(0.01)\n"+
			"finally:\n"+threadsBack, pyStr(started), pyStr(release)))
		waitFile(t, started, 10*time.Second)
		for i := 0; i < 6; i++ { // QUERIES_MAX is 4
			a := w.ask(map[string]any{"kind": "vars"})
			assert.Equal(t, false, a.h["ok"], "%s", a.line)
			assert.Contains(t, a.str("error"), "no thread to answer on", "query %d", i)
		}
		require.NoError(t, os.WriteFile(release, nil, 0o600))
		done, _ := w.until("done", 30*time.Second, nil)
		assert.EqualValues(t, cell, done.num("cell"))
		assert.Equal(t, "ok", done.str("status"), "%s", done.line)
		a := w.ask(map[string]any{"kind": "vars"})
		assert.Equal(t, true, a.h["ok"], "%s", a.line)
	})
}

// A query that waits for the running cell, sent before that cell's exec
// frame reached the worker (on a host, sshd may write the session's
// channel before the cell link), names the cell: the worker waits for its
// frame, then for the cell, and answers with what it made.
func TestQueryWaitsForItsCellsFrame(t *testing.T) {
	w := lingeringWorker(t)
	w.run("x = 5", 10*time.Second)
	link := cellLink(t, w.ready.str("sock"), w.ready.h["cells_token"])
	require.NotNil(t, link)
	w.qid++
	w.send(map[string]any{"op": "query", "id": w.qid, "kind": "vars", "wait": 10, "cell": 2}, nil)
	time.Sleep(300 * time.Millisecond)
	link.send(map[string]any{"op": "exec", "cell": 2, "code": "import time\ntime.sleep(0.2)\ny = 7", "fence": "<L>"})
	id := int64(w.qid)
	a, _ := w.until("answer", 30*time.Second, func(f frame) bool { return f.num("id") == id })
	require.Equal(t, true, a.h["ok"], "%s", a.line)
	names := []string{}
	for _, v := range list(a, "vars") {
		names = append(names, v.(map[string]any)["name"].(string))
	}
	assert.Contains(t, names, "y", "%s", a.line)
	assert.EqualValues(t, 2, a.num("cell"), "it waited for cell 2: %s", a.line)
}

// A repr or an expression that loops with no Python call in its loop (a
// comprehension, while True: pass) is stopped at its deadline and leaves
// no thread that spins; one in a C call that does not return is answered
// for at the query's budget, and its thread ends once the call returns.
// Through a worker, on the newest Python: the toolkit's own tests
// (test_query.py) hold the same on every Python. Past the first query,
// which loads the query module, its limits are set shorter, for the
// test's time: an eval's 0.5 s, a query's 1.5 s and 0.5 s past it.
func TestQueryStopsLoops(t *testing.T) {
	t.Parallel()
	w := startWorker(t, newestPython(t))
	done := w.run(`
import os, threading, time
class D: __repr__ = lambda s: [None for _ in iter(int, 1)]
def spin():
    while True: pass
class W:
    def __repr__(self):
        spin()
q3, q4 = D(), W()
def cpu():
    with open('/proc/self/stat') as f:
        v = f.read().rsplit(')', 1)[1].split()
    return (int(v[11]) + int(v[12])) / os.sysconf('SC_CLK_TCK')
`, 20*time.Second)
	require.Equal(t, "ok", done.str("status"), "%s", done.line)
	ask := func(q map[string]any) (frame, time.Duration) {
		t0 := time.Now()
		a := w.ask(q)
		return a, time.Since(t0)
	}

	a, took := ask(map[string]any{"kind": "vars"})
	t.Logf("vars: %.2fs", took.Seconds())
	assert.Less(t, took, 2*time.Second)
	assert.Contains(t, string(a.line), `"name":"q3","type":"__main__.D","repr":"<repr() took over 0.2s>"`)
	assert.Contains(t, string(a.line), `"name":"q4","type":"__main__.W","repr":"<repr() took over 0.2s>"`)
	done = w.run("import sys\nq = sys.modules['replhub_toolkit.query']\nq.LONG_TIME, q.BUDGET, q.QUIT = 0.5, 1.5, 0.5", 20*time.Second)
	require.Equal(t, "ok", done.str("status"), "%s", done.line)

	a, took = ask(map[string]any{"kind": "inspect", "expr": "spin()"})
	t.Logf("inspect spin(): %.2fs", took.Seconds())
	assert.Less(t, took, 1500*time.Millisecond)
	assert.Equal(t, "evaluating spin() took over 0.5s", a.str("error"))

	// Answered at the budget and QUIT past it (2 s), the sleep 2 s on.
	a, took = ask(map[string]any{"kind": "inspect", "expr": "time.sleep(4)"})
	t.Logf("inspect time.sleep(4): %.2fs", took.Seconds())
	assert.Less(t, took, 3*time.Second)
	assert.Contains(t, a.str("error"), "in a C call")

	// Nothing spins; the sleeping query's thread ends with its sleep.
	done = w.run("c = cpu(); time.sleep(1); round(cpu() - c, 2)", 20*time.Second)
	used, err := strconv.ParseFloat(done.str("value"), 64)
	require.NoError(t, err, "%s", done.line)
	assert.Less(t, used, 0.5, "CPU seconds the worker used in 1s")
	done = w.run("for _ in range(500):\n    if not [t for t in threading.enumerate() if t.name.startswith('replhub-query')]:\n        break\n    time.sleep(0.01)\nlen(threading.enumerate())", 20*time.Second)
	assert.Equal(t, "ok", done.str("status"), "%s", done.line)
	done = w.run("sorted(t.name for t in threading.enumerate() if t.name.startswith('replhub-query'))", 20*time.Second)
	assert.Equal(t, "[]", done.str("value"))
	w.healthy()
}
