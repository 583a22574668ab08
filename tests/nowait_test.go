package tests

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/tests/hubtest"
	"github.com/replhub/replhub/wire"
)

// exec --no-wait returns the cell's number at once; wait --cell N collects
// that cell, and says so plainly when it cannot.
func TestExecNoWaitAndWaitCell(t *testing.T) {
	e := hubtest.Start(t)
	ok(t, e.Run("exec", "nw", "import os, time"))
	// The cell runs until the test opens its gate: the calls below find
	// it running however slow the machine is.
	gate := e.Dir + "/gate-nw"
	t0 := time.Now()
	r := e.Run("exec", "nw", fmt.Sprintf("while not os.path.exists(%q): time.sleep(0.02)\nprint('slept'); 42", gate), "--no-wait")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Less(t, time.Since(t0), 5*time.Second)
	assert.Equal(t, "[cell 2 started: `replhub wait nw --cell 2` collects its output and result]\n", r.Stdout)
	r = e.Run("exec", "nw", "1", "--no-wait")
	assert.Equal(t, 2, r.Code, "one cell at a time: %s", r)
	assert.Contains(t, r.Stderr, "session 'nw' is busy: cell 2")

	r = e.Run("wait", "nw", "--cell", "3")
	assert.Equal(t, 2, r.Code)
	assert.Contains(t, r.Stderr, "cell 3 of session 'nw' has not started: the last cell is 2")
	openGate(t, gate)
	r = e.Run("wait", "nw", "--cell", "2", "-t", "10")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "slept\nOut[2]: 42")
	r = e.Run("wait", "nw", "--cell", "2")
	assert.Equal(t, 2, r.Code)
	assert.Contains(t, r.Stderr, "cell 2 of session 'nw' was collected already")

	// --json says started; a result nobody collected waits for the next exec.
	out, jr := jsonResult(t, e, "exec", "--json", "nw", "'quick'", "--no-wait")
	require.Equal(t, 0, jr.Code, "%s", jr)
	assert.Equal(t, wire.StatusStarted, out.Status)
	assert.Equal(t, 3, out.Cell)
	time.Sleep(300 * time.Millisecond)
	assert.Contains(t, ok(t, e.Run("exec", "nw", "1")), "Out[3]: 'quick'")
}
