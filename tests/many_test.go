package tests

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/client"
	"github.com/replhub/replhub/tests/hubtest"
)

// Fifty sessions started at once, each by a client of its own: every one
// answers with its own value, and the hub's cost for them stays small. An
// idle session holds no output buffer and no thread of the hub's (a wait
// on a child used to block a thread each, and a session held 320 KiB of
// buffers), so the bounds below are several times what the hub takes and
// a fraction of what it took: fifty threads and more, 7 MB and more.
func TestFiftySessionsAtOnce(t *testing.T) {
	const count = 50
	e := hubtest.Start(t)
	ok(t, e.Run("exec", "first", "1"))
	pid := e.HubPid()
	require.NotZero(t, pid)
	before := procStatus(t, pid, "VmRSS")

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, count)
	for i := 0; i < count; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := client.New(e.Paths)
			c.Exe, c.Env = e.HubBin, e.Vars
			defer c.Close()
			res, err := c.Exec(ctx, fmt.Sprintf("many-%d", i), fmt.Sprintf("v = %d * 3; v", i),
				client.ExecOptions{Cwd: e.Cwd, Env: e.Vars, Timeout: 2 * time.Minute})
			if err == nil && !strings.Contains(res.Text(), fmt.Sprintf("Out[1]: %d", i*3)) {
				err = fmt.Errorf("many-%d answered %q", i, res.Text())
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	l := sessionList(t, e)
	assert.Len(t, l.Sessions, count+1)

	threads := procStatus(t, pid, "Threads")
	assert.Less(t, threads, int64(count*3/4), "the hub's threads with %d idle sessions", count)
	// The hub gives back what the burst took once it is idle (trim.go);
	// the bound is met at once or after a few seconds. A race-built hub's
	// shadow memory is several times the hub's own: there only the
	// threads are held to a bound.
	const limit = 6 << 20
	var grew int64
	for i := 0; i < 40; i++ {
		if grew = procStatus(t, pid, "VmRSS") - before; grew < limit || hubtest.Race {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("%d sessions: the hub grew by %.1f MB, %d threads", count, float64(grew)/(1<<20), threads)
	if !hubtest.Race {
		assert.Less(t, grew, int64(limit), "the hub's resident memory grew by %.1f MB for %d sessions", float64(grew)/(1<<20), count)
	}

	r := e.Run("exec", "many-7", "v")
	assert.Contains(t, r.Stdout, "Out[2]: 21", "%s", r)
}

// procStatus reads a field of /proc/PID/status: a size in bytes (the
// kernel's kB), or a count.
func procStatus(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && k == field {
			var n int64
			fmt.Sscanf(strings.TrimSpace(v), "%d", &n)
			if strings.HasSuffix(strings.TrimSpace(v), "kB") {
				n <<= 10
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}
