package tests

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/tests/hubtest"
)

// cellsProbe is a cell whose value says whether the worker reads a cell
// pipe or link, and counts the frames it took off them.
const cellsProbe = `[(o.cells is not None, o.cells_read) for o in __import__("gc").get_objects() if type(o).__name__ == "Session" and hasattr(o, "cells_read")][0]`

// A local session takes its exec frames on a pipe of their own, which its
// main thread reads while idle (README: A cell's round trip); once a new
// hub has adopted it, on a second connection to its socket (the cell
// link), and its cells, interrupts and queries go on as before.
func TestLocalCellsComeOnTheirOwnPipe(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	probe := cellsProbe
	r := e.Run("exec", "c", probe)
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "Out[1]: (True, 1)", "the hub sent the cell on the cell pipe")
	r = e.Run("exec", "c", probe)
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "Out[2]: (True, 2)")

	// A cell that sleeps, interrupted.
	interrupted := func() {
		t.Helper()
		r := e.Run("exec", "c", "import time; time.sleep(30)", "--no-wait")
		require.Equal(t, 0, r.Code, "%s", r)
		r = e.Run("interrupt", "c")
		require.Equal(t, 0, r.Code, "%s", r)
		r = e.Run("wait", "c")
		assert.Contains(t, r.Stdout, "KeyboardInterrupt", "%s", r)
	}

	interrupted()

	r = e.Run("restart")
	require.Equal(t, 0, r.Code, "%s", r)
	r = e.Run("exec", "c", "x = 6 * 7; x")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "42")
	r = e.Run("exec", "c", probe)
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "(True, 5)", "the new hub's cells came on its cell link: %s", r)

	// And so on through every restart, an interrupt and a query beside.
	r = e.Run("restart")
	require.Equal(t, 0, r.Code, "%s", r)
	interrupted()
	r = e.Run("vars", "c")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "x")
	r = e.Run("exec", "c", probe)
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "(True, 7)", "every cell came on one: %s", r)
}

// A session whose worker kept more output than its socket holds while no
// hub was attached (the hub was killed while a cell printed) is adopted
// with a cell link all the same, and at once.
func TestCellLinkAfterKeptOutput(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	ok(t, e.Run("exec", "c", "x = 1"))
	ok(t, e.Run("exec", "c", "import time; time.sleep(1); print('x' * 1000000)", "--no-wait"))
	hubPid := e.HubPid()
	require.NoError(t, syscall.Kill(hubPid, syscall.SIGKILL))
	require.True(t, hubtest.WaitGone(hubPid, 10*time.Second))
	time.Sleep(2 * time.Second) // the cell prints while no hub is attached

	t0 := time.Now()
	r := e.Run("wait", "c") // a new hub starts, and adopts the session
	took := time.Since(t0)
	require.Equal(t, 0, r.Code, "%s", r.Stderr)
	r = e.Run("exec", "c", cellsProbe)
	require.Equal(t, 0, r.Code, "%s", r.Stderr)
	out := r.Stdout[strings.LastIndex(r.Stdout, "Out["):]
	assert.Contains(t, out, "(True, ", "the new hub's cell came on a cell link: %s", out)
	assert.Less(t, took, 2500*time.Millisecond, "adopting took the cell link's whole timeout")
}
