package boot

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A done frame whose header would pass the hub's bound goes without its
// display items, and so without their payload: its header announces none,
// and the session reads on in step. The cell's fence is written once, and
// the done frame sent again does not call the cell quiet: the hub must
// wait for that fence, which comes after the cell's output.
func TestDoneOverTheBoundDropsItsPayload(t *testing.T) {
	eachPython(t, func(t *testing.T, py string) {
		w := startWorker(t, py)
		w.run("x = 1", 20*time.Second)
		done := w.run("import replhub_toolkit.display as d; d.add('x' * (2 << 20), b'abc'); print('hi')", 20*time.Second)
		assert.Nil(t, done.h["display"], "%.200s", done.line)
		assert.Nil(t, done.h["len"], "%.200s", done.line)
		assert.Empty(t, done.data)
		assert.Equal(t, float64(1), done.h["dropped"], "%.200s", done.line)
		assert.Nil(t, done.h["quiet"], "%.200s", done.line)
		done = w.run("x + 1", 20*time.Second)
		assert.Equal(t, "2", done.str("value"))
	})
}

// A worker on this machine tells its memory in its first done frame only
// (the hub reads /proc for the rest), however long its cells take: the
// walk of its process tree would cost every cell after a pause a tenth
// of a millisecond.
func TestLocalWorkerTellsItsMemoryOnce(t *testing.T) {
	eachPython(t, func(t *testing.T, py string) {
		w := startWorker(t, py)
		done := w.run("x = 1", 20*time.Second)
		assert.Greater(t, done.num("rss"), int64(1<<20), "%.200s", done.line)
		done = w.run("import time; time.sleep(1.1)", 20*time.Second)
		assert.Equal(t, "ok", done.str("status"), "%.200s", done.line)
		assert.Nil(t, done.h["rss"], "%.200s", done.line)
	})
}

// A done frame lists the session's names only when the list changed since
// the last one sent: the hub keeps the last list it had. A cell used to
// sort all the names, which cost a session of 5,000 names 1.3-2 ms a cell.
// The list goes whole to a new hub (TestDurableWorkerIsAdopted) and when
// the hub asks for it in the exec frame; a reset's answer always carries
// it, and the done frames after it send what changed since.
func TestDoneSendsNamesWhenTheyChange(t *testing.T) {
	eachPython(t, func(t *testing.T, py string) {
		w := startWorker(t, py)
		names := func(code string) any {
			done := w.run(code, 20*time.Second)
			require.Equal(t, "ok", done.str("status"), "%s: %.300s", code, done.line)
			return done.h["names"]
		}
		assert.Equal(t, []any{"x"}, names("x = 1"), "the first cell's")
		assert.Nil(t, names("x = 2"), "rebound, not added")
		assert.Nil(t, names("1 + 1"), "_ is not listed")
		assert.Equal(t, []any{"x", "y"}, names("y = 1"))
		assert.Equal(t, []any{"y"}, names("del x"))
		assert.Equal(t, []any{"w", "y"}, names("del y; w = 1; y = 2"), "as many names, one other")
		assert.Nil(t, names("_p = 1; globals()[7] = 1; globals()['n' * 101] = 1"), "none of them is listed")
		assert.Nil(t, names("del display; display = 1"), "a start name is not listed")
		assert.Equal(t, []any{"w", "y", "z"}, names("import threading as _th; t = _th.Thread(target=lambda: globals().update(z=1)); t.start(); t.join(); del t"),
			"another thread's")
		many := names("for i in range(300): globals()['v%03d' % i] = i").([]any)
		assert.Len(t, many, 200, "the first 200")
		assert.Equal(t, "i", many[0])
		assert.Nil(t, names("zz = 1"), "past the first 200")
		assert.NotNil(t, names("aa = 1"))

		// A hub that missed a list asks for it.
		w.cell++
		w.send(map[string]any{"op": "exec", "cell": w.cell, "code": "1", "fence": "<FN>", "names": true}, nil)
		done, _ := w.until("done", 20*time.Second, func(f frame) bool { return f.num("cell") == int64(w.cell) })
		assert.Len(t, done.h["names"], 200, "%.200s", done.line)
		assert.Nil(t, names("1"))

		a := w.ask(map[string]any{"kind": "reset"})
		require.Equal(t, true, a.h["ok"], "%s", a.line)
		assert.Equal(t, []any{}, a.h["names"], "the list after the reset: %s", a.line)
		assert.Equal(t, []any{"aa"}, names("aa = 1"), "after a reset, the hub's list is the reset's")
		assert.Equal(t, []any{}, names("del aa"))
		a = w.ask(map[string]any{"kind": "reset"})
		require.Equal(t, true, a.h["ok"], "%s", a.line)
		assert.Equal(t, []any{}, a.h["names"], "a reset's answer lists the names, changed or not: %s", a.line)
	})
}

// A reset's answer and a done frame made beside it reach the hub in the
// order their lists were made (testdata/names_order.py), on every Python.
func TestResetNamesInOrder(t *testing.T) {
	eachPython(t, func(t *testing.T, py string) {
		out, err := exec.Command(py, "testdata/names_order.py", "worker.py").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "ok" {
			t.Fatalf("%s: %v\n%s", py, err, out)
		}
	})
}

// Names keeps its list in step with the namespace's keys over random
// changes, on every Python (testdata/names_diff.py).
func TestNamesKeptInStep(t *testing.T) {
	eachPython(t, func(t *testing.T, py string) {
		out, err := exec.Command(py, "testdata/names_diff.py", "worker.py", "300").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "ok" {
			t.Fatalf("%s: %v\n%s", py, err, out)
		}
	})
}

// The worker's Sigint drops a SIGINT sent again for an interrupt that was
// raised already, and only that one, on every Python
// (testdata/sigint_extra.py).
func TestSigintSentAgain(t *testing.T) {
	eachPython(t, func(t *testing.T, py string) {
		out, err := exec.Command(py, "testdata/sigint_extra.py", "worker.py").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "ok" {
			t.Fatalf("%s: %v\n%s", py, err, out)
		}
	})
}
