package tests

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/client"
	"github.com/replhub/replhub/tests/hubtest"
	"github.com/replhub/replhub/wire"
)

// jsonResult runs replhub with args (which ask for --json) and decodes
// the result it prints.
// mixCell prints to both streams, from Python, from a child and from
// fd 2, and ends with a value.
const mixCell = "import sys, subprocess\n" +
	"print('o1'); print('e1', file=sys.stderr); sys.stdout.write('o2\\n'); sys.stderr.write('e2\\n')\n" +
	"subprocess.run([sys.executable, '-c', 'import sys; sys.stderr.write(\"child\\\\n\")'])\n" +
	"print('o3'); 40 + 2"

// checkMix checks a result of mixCell.
func checkMix(t *testing.T, res wire.Result) {
	t.Helper()
	assert.Equal(t, wire.StatusOK, res.Status, "%+v", res)
	assert.Equal(t, "o1\ne1\no2\ne2\nchild\no3\n", res.Output)
	assert.Equal(t, "o1\no2\no3\n", res.Stdout)
	assert.Equal(t, "e1\ne2\nchild\n", res.Stderr)
	require.NotNil(t, res.Value)
	assert.Equal(t, "42", *res.Value, "the value is in neither stream")
}

// exec --json gives stdout and stderr beside the merged output; a
// traceback stays in error; a cell still running gives what it wrote so
// far, and wait the rest; the Go client returns the same.
func TestExecJSONStreams(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	mix, _ := jsonResult(t, e, "exec", "s", "--json", mixCell)
	checkMix(t, mix)

	res, _ := jsonResult(t, e, "exec", "s", "--json", "print('x'); {}['k']")
	assert.Equal(t, wire.StatusError, res.Status)
	assert.Equal(t, "x\n", res.Stdout)
	assert.Empty(t, res.Stderr, "the cell's own traceback is in error")
	require.NotNil(t, res.Error)
	assert.Contains(t, res.Error.Traceback, "KeyError")

	res, _ = jsonResult(t, e, "exec", "s", "--json", "-t", "0.5",
		"import time; print('a', flush=True); sys.stderr.write('b\\n'); time.sleep(1.5); print('c'); sys.stderr.write('d\\n')")
	assert.Equal(t, wire.StatusRunning, res.Status, "%+v", res)
	assert.Equal(t, "a\n", res.Stdout)
	assert.Equal(t, "b\n", res.Stderr)
	res, _ = jsonResult(t, e, "wait", "s", "--json", "-t", "20")
	assert.Equal(t, wire.StatusOK, res.Status, "%+v", res)
	assert.Equal(t, texts3("c\nd\n", "c\n", "d\n"), texts3(res.Output, res.Stdout, res.Stderr))

	c := e.Client()
	got, err := c.Exec(context.Background(), "s", "print('go'); sys.stderr.write('went\\n')", client.ExecOptions{Timeout: 20 * time.Second})
	require.NoError(t, err)
	assert.Equal(t, texts3("go\nwent\n", "go\n", "went\n"), texts3(got.Output, got.Stdout, got.Stderr))

	// A flood is capped per stream as the merged output is.
	res, _ = jsonResult(t, e, "exec", "s", "--json", "print('o' * 100000); sys.stderr.write('small\\n')")
	assert.True(t, res.StdoutTruncated)
	assert.False(t, res.StderrTruncated)
	assert.Equal(t, "small\n", res.Stderr)
	assert.True(t, strings.HasPrefix(res.Stdout, "ooo"))
	assert.Less(t, len(res.Stdout), 40000)

	// A caller's cap applies to each stream alike.
	res, _ = jsonResult(t, e, "exec", "s", "--json", "--max-output", "10", "print('o' * 50); print('e' * 50, file=sys.stderr)")
	assert.True(t, res.StdoutTruncated && res.StderrTruncated && res.Truncated, "%+v", res)
	assert.Equal(t, "ooooo\n[... 41 characters left out ...]\noooo", strings.TrimSpace(res.Stdout))

	// The text reply stays merged.
	r := e.Run("exec", "s", "print('p'); print('q', file=sys.stderr)")
	assert.Equal(t, "p\nq\n", r.Stdout)

	// A crash's last words, written straight to the output stream, are
	// stderr.
	res, _ = jsonResult(t, e, "exec", "crash", "--json", "print('going'); import faulthandler; faulthandler._sigsegv()")
	assert.Equal(t, wire.StatusDead, res.Status, "%+v", res)
	assert.Equal(t, "going\n", res.Stdout)
	assert.Contains(t, res.Stderr, "Fatal Python error")
}

func texts3(all, stdout, stderr string) [3]string { return [3]string{all, stdout, stderr} }

// The streams survive replhub restart: unread output crosses it each
// stream apart, a cell running across it ends with its streams, and the
// adopted worker's output (now in out frames) still comes apart.
func TestStreamsAcrossRestart(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	ok(t, e.Run("exec", "d", "import sys, time, threading"))
	ok(t, e.Run("exec", "d", "print('u-out'); sys.stderr.write('u-err\\n')", "--no-wait"))
	time.Sleep(300 * time.Millisecond)
	r := e.Run("exec", "d", "print('r1'); sys.stderr.write('r2\\n'); time.sleep(3); print('r3'); sys.stderr.write('r4\\n'); 7", "-t", "0.5")
	require.Equal(t, 3, r.Code, "%s", r)
	ok(t, e.Run("restart"))
	res, _ := jsonResult(t, e, "wait", "d", "--json", "-t", "20")
	assert.Equal(t, wire.StatusOK, res.Status, "%+v", res)
	assert.Equal(t, "r3\n", res.Stdout)
	assert.Equal(t, "r4\n", res.Stderr)
	mix, _ := jsonResult(t, e, "exec", "d", "--json", mixCell)
	checkMix(t, mix)

	// Output between cells, while the hub restarts, arrives apart.
	ok(t, e.Run("exec", "d", "threading.Timer(0.3, lambda: (print('late-out'), sys.stderr.write('late-err\\n'))).start()"))
	ok(t, e.Run("restart"))
	time.Sleep(500 * time.Millisecond)
	res, _ = jsonResult(t, e, "exec", "d", "--json", "print('now')")
	assert.Equal(t, "late-out\nnow\n", res.Stdout, "%+v", res)
	assert.Equal(t, "late-err\n", res.Stderr)

	// What a running cell wrote before the restart, unread, crosses it
	// in the order written, each stream apart.
	ok(t, e.Run("exec", "d", "print('h1'); sys.stderr.write('h2\\n'); print('h3'); time.sleep(1.5); sys.stderr.write('h4\\n')", "--no-wait"))
	time.Sleep(300 * time.Millisecond)
	ok(t, e.Run("restart"))
	res, _ = jsonResult(t, e, "wait", "d", "--json", "-t", "20")
	assert.Equal(t, "h1\nh2\nh3\nh4\n", res.Output, "%+v", res)
	assert.Equal(t, "h1\nh3\n", res.Stdout)
	assert.Equal(t, "h2\nh4\n", res.Stderr)
}

// A cell after which nothing was written ends without waiting for a
// fence (the worker writes none), and output that comes between cells is
// still the next reply's, each stream apart.
func TestStreamsQuietCells(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	ok(t, e.Run("exec", "q", "import sys, threading"))
	for _, code := range []string{"1", "threading.Timer(0.2, lambda: (print('late-out'), sys.stderr.write('late-err\\n'))).start()"} {
		res, _ := jsonResult(t, e, "exec", "q", "--json", code)
		assert.Equal(t, wire.StatusOK, res.Status, "%+v", res)
		assert.Empty(t, res.Output, "%+v", res)
		assert.Empty(t, res.Notes, "no note of a fence that never came: %+v", res)
	}
	time.Sleep(500 * time.Millisecond)
	res, _ := jsonResult(t, e, "exec", "q", "--json", "2")
	assert.Equal(t, "late-out\n", res.Stdout, "%+v", res)
	assert.Equal(t, "late-err\n", res.Stderr)
	assert.Equal(t, "2", *res.Value)
	res, _ = jsonResult(t, e, "exec", "q", "--json", "3")
	assert.Empty(t, res.Output, "%+v", res)
	assert.Empty(t, res.Notes, "%+v", res)
}

// A remote session's streams come apart too, over its first link and
// after a dropped link is reattached (out frames on its socket).
func TestRemoteStreams(t *testing.T) {
	t.Parallel()
	w, relay := lingerWorld(t)
	mix, _ := jsonResult(t, w.Env, "exec", "r", "--json", "--host", "lab", mixCell)
	checkMix(t, mix)
	endWorkerAtCleanup(t, w.Env, "r")
	relay.Drop()
	time.Sleep(1500 * time.Millisecond)
	relay.Restore()
	mix, _ = jsonResult(t, w.Env, "exec", "r", "--json", mixCell)
	checkMix(t, mix)
	ok(t, w.Run("kill", "r"))
}
