package tests

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/tests/hubtest"
)

// A local session takes its exec frames on a pipe of their own, which its
// main thread reads while idle (README: A cell's round trip); once a new
// hub has adopted it, they come on the socket it was adopted on, and its
// cells, interrupts and queries go on as before.
func TestLocalCellsComeOnTheirOwnPipe(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	probe := `import gc; [o for o in gc.get_objects() if type(o).__name__ == "Session" and hasattr(o, "seen_cell")][0].cells is not None`
	r := e.Run("exec", "c", probe)
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "Out[1]: True", "the worker reads its cell pipe")

	r = e.Run("exec", "c", "import time; time.sleep(30)", "--no-wait")
	require.Equal(t, 0, r.Code, "%s", r)
	r = e.Run("interrupt", "c")
	require.Equal(t, 0, r.Code, "%s", r)
	r = e.Run("wait", "c")
	assert.Contains(t, r.Stdout, "KeyboardInterrupt", "%s", r)

	r = e.Run("restart")
	require.Equal(t, 0, r.Code, "%s", r)
	r = e.Run("exec", "c", "x = 6 * 7; x")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "42")
	r = e.Run("exec", "c", probe)
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "False", "the old hub's pipe ended with it: %s", r)
	r = e.Run("vars", "c")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "x")
}
