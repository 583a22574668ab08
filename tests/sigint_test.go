package tests

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/internal/sigflood"
	"github.com/replhub/replhub/tests/hubtest"
)

// Puts and calls between two sessions while the caller, then the target,
// is flooded with SIGINTs: each cell ends (with its result, an error or
// KeyboardInterrupt) within a bound, and once the flood stops both
// sessions are free again and the next put goes through whole.
//
// Not parallel: the flood takes a core, which would stretch other tests'
// bounds.
func TestTransfersUnderSigintFlood(t *testing.T) {
	needCloudpickle(t)
	e := hubtest.Start(t)
	e.Setenv("REPLHUB_PYTHON", py(t, "3.12"))
	ok(t, e.Run("exec", "b", "import os"))
	ok(t, e.Run("exec", "a", `b = session("b")`))
	for _, who := range []string{"a", "b"} {
		stop := sigflood.Start(workerPid(t, e, who))
		defer stop() // on a failure; stop is idempotent
		cells, ended := 0, map[string]int{}
		for t0 := time.Now(); time.Since(t0) < 3*time.Second && cells < 50; cells++ {
			r := e.Run("exec", "a", `try:
    b.put(x=bytearray(4 << 20)); print("len", b.call(lambda: len(x)))
except BaseException as e:
    print(type(e).__name__)`, "-t", "30")
			require.NotEqual(t, 3, r.Code, "flooding %s: the cell still runs after 30 s: %s", who, r)
			ended[strings.Fields(r.Stdout + r.Stderr + " none")[0]]++
		}
		stop()
		t.Logf("flooding %s: %d cells, how they ended: %v", who, cells, ended)
		for _, s := range []string{"a", "b"} {
			// b may still be winding the last put down.
			assert.Contains(t, ok(t, freeAgain(t, e, s, "1 + 1")), "2", "after flooding %s, session %s", who, s)
		}
		out := ok(t, e.Run("exec", "a", `b.put(y=bytes(9 << 20)); b.call(lambda: len(y))`, "-t", "30"))
		assert.Contains(t, out, "9437184", "after flooding %s", who)
	}
}
