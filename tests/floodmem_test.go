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
	const slack = 4 << 20
	var rss int64
	for range 40 {
		rss = sessionList(t, e).Hub.RSS // a request a round: never idle
		if rss < before+slack {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("%.1f MB before the flood, %.1f MB after", float64(before)/(1<<20), float64(rss)/(1<<20))
	assert.Less(t, rss, before+slack, "the hub held %.1f MB before the flood, %.1f MB after", float64(before)/(1<<20), float64(rss)/(1<<20))
}
