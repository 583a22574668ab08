package tests

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/tests/hubtest"
)

// A flood of output, once taken, is given back to the system soon, even
// while requests keep coming, so that the idle trim never has its turn.
func TestExecFloodMemoryGoesBack(t *testing.T) {
	if hubtest.Race {
		t.Skip("the race detector's memory is not the hub's")
	}
	e := hubtest.Start(t)
	ok(t, e.Run("exec", "f", "1"))
	before := sessionList(t, e).Hub.RSS
	r := e.Run("exec", "f", `import sys; sys.stdout.write("x" * (60 << 20))`)
	require.Equal(t, 0, r.Code, "%s", r)
	require.Contains(t, r.Stdout, "characters left out")
	floodGoesBack(t, e, before)
}

// So is the flood of a cell that finished while nobody waited, once the
// next exec's reply has it.
func TestExecFloodMemoryGoesBackUnwaited(t *testing.T) {
	if hubtest.Race {
		t.Skip("the race detector's memory is not the hub's")
	}
	e := hubtest.Start(t)
	ok(t, e.Run("exec", "f", "import sys, time"))
	before := sessionList(t, e).Hub.RSS
	r := e.Run("exec", "f", `time.sleep(0.5); sys.stdout.write("x" * (60 << 20))`, "-t", "0.1")
	require.Equal(t, 3, r.Code, "%s", r)
	waitFor(t, func() bool { return sessionInfo(t, e, "f").Unread }, func() string { return "the cell's result never waited unread" })
	res, r := jsonResult(t, e, "exec", "--json", "f", "2")
	require.NotEmpty(t, res.Notes, "%s", r)
	require.Contains(t, res.Notes[0], "finished while nobody waited", "%s", r)
	require.NotNil(t, res.Earlier, "%s", r)
	require.Contains(t, res.Earlier.Output, "characters left out")
	floodGoesBack(t, e, before)
}

// floodGoesBack asks for the hub's memory, a request a round (never
// idle), until it is back near before.
func floodGoesBack(t *testing.T, e *hubtest.Env, before int64) {
	t.Helper()
	const slack = 4 << 20
	var rss int64
	for range 40 {
		rss = sessionList(t, e).Hub.RSS
		if rss < before+slack {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("%.1f MB before the flood, %.1f MB after", float64(before)/(1<<20), float64(rss)/(1<<20))
	assert.Less(t, rss, before+slack, "the hub held %.1f MB before the flood, %.1f MB after", float64(before)/(1<<20), float64(rss)/(1<<20))
}
