package hub

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/proto"
	"github.com/replhub/replhub/wire"
)

// Only a regular file of ours with no group or other bits may be loaded.
func TestCheckSwapFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	require.NoError(t, os.WriteFile(good, []byte("x"), 0o600))
	link := filepath.Join(dir, "link")
	require.NoError(t, os.Symlink(good, link))
	loose := filepath.Join(dir, "loose")
	require.NoError(t, os.WriteFile(loose, []byte("x"), 0o600))
	require.NoError(t, os.Chmod(loose, 0o604))
	for path, want := range map[string]string{good: "", link: "is a symbolic link", loose: "has mode 0604", dir: "not a regular file"} {
		fi, err := os.Lstat(path)
		require.NoError(t, err)
		err = checkSwapFile(path, fi)
		if want == "" {
			assert.NoError(t, err)
			continue
		}
		assert.ErrorContains(t, err, want, path)
		f, _, err := openSwapFile(path)
		if f != nil {
			f.Close()
		}
		assert.Error(t, err, path)
	}
	f, _, err := openSwapFile(good)
	require.NoError(t, err)
	f.Close()
}

// The restore note says, in one block, all that a user must know.
func TestSwapNote(t *testing.T) {
	rec := &swapRecord{Name: "chirp", When: time.Now().Add(-2 * time.Hour), Why: "nobody used it for 24h",
		Host: "local", Skipped: []proto.SwapSkip{{Name: "sock", Why: "TypeError: no"}},
		Threads: []string{"ticker (daemon)"}, Children: []string{"pid 7: sleep 9"},
		Output: "between cells\n", Result: &wire.Result{Cell: 3, Status: wire.StatusOK, Output: "late\n", Value: ptr("42")}}
	note := rec.note(wire.SessionInfo{Python: "3.11.7", Cwd: "/w"}, &proto.Restored{OK: true, Names: []string{"a", "b"},
		Skipped: []proto.SwapSkip{{Name: "f", Why: "AttributeError: gone"}}, Note: "its folder /x is gone"}, "/s/kept/chirp-1.pickle")
	for _, want := range []string{
		"session 'chirp' was swapped to disk at ", "(2h0m ago; nobody used it for 24h) and is back: 2 names, python 3.11.7, cwd /w",
		"\nnot swapped (it did not pickle): sock (TypeError: no)",
		"\nnot restored (it did not load): f (AttributeError: gone)",
		"\nthe swap is kept in /s/kept/chirp-1.pickle",
		"\nthreads that were running then (they are not now): ticker (daemon)",
		"\nchild processes that were running then (ended): pid 7: sleep 9",
		"\nits folder /x is gone",
		"\noutput nobody had read:\n    between cells",
		"\ncell 3's reply, which nobody had read:\n    late\n    Out[3]: 42",
	} {
		assert.Contains(t, note, want)
	}
	assert.False(t, strings.HasSuffix(note, "\n"))
}

func ptr(s string) *string { return &s }

// The sweep picks the sessions to swap on what it saw a moment before:
// one that was starting then, or running a cell, may have become idle
// since with its first cell or a new one about to start. swapOut looks
// again, and keeps a session used less than swap_after_hours ago, as the
// sweep keeps one it saw idle.
func TestSweepSwapLooksAgain(t *testing.T) {
	h := testHub(t, testPaths(t))
	s := startedSession(h, "fresh", os.Getpid())
	close(s.ready)
	s.lastActive = time.Now().Add(-2 * time.Second)
	out := h.swapOut(context.Background(), s, false, "nobody used it for 5h", time.Hour)
	assert.Equal(t, wire.SwapKept, out.Status)
	assert.Regexp(t, `^used 2(\.\d+)?s ago \(swap_after_hours is 1\)$`, out.Why)
	assert.Nil(t, s.serving, "no swap started")
	assert.Equal(t, stateIdle, s.state)
}

// A request for a session marks it used before it looks for a swap under
// way: a sweep's swap that comes after the look keeps the session, and
// does not take it from under the request (which would fail as busy).
func TestEnsureMarksUseBeforeTheSweepLooks(t *testing.T) {
	h := testHub(t, testPaths(t))
	s := startedSession(h, "long-idle", os.Getpid())
	close(s.ready)
	s.lastActive = time.Now().Add(-5 * time.Hour)
	h.mu.Lock()
	h.sessions[s.name] = s
	h.mu.Unlock()
	got, created, _, err := h.ensure(context.Background(), wire.Request{Op: wire.OpExec, Name: s.name})
	require.NoError(t, err)
	require.Same(t, s, got)
	assert.False(t, created)
	s.mu.Lock()
	idle := time.Since(s.lastActive)
	s.mu.Unlock()
	require.Less(t, idle, time.Minute, "the request marked the session used")
	out := h.swapOut(context.Background(), s, false, "nobody used it for 5h", time.Hour)
	assert.Equal(t, wire.SwapKept, out.Status)
	assert.Regexp(t, `^used \d+(\.\d+)?s ago \(swap_after_hours is 1\)$`, out.Why)
	assert.Nil(t, s.serving, "no swap started")
}

// The sweep hands swapOut its swap_after_hours: a session it saw busy,
// found idle and just used when its turn comes, is kept.
func TestSweepPassesItsIdleTime(t *testing.T) {
	p := testPaths(t)
	h := testHub(t, p)
	require.NoError(t, os.MkdirAll(filepath.Dir(p.ConfigFile()), 0o700))
	require.NoError(t, os.WriteFile(p.ConfigFile(), []byte(`{"swap_after_hours": 1}`), 0o600))
	s := startedSession(h, "seen-busy", os.Getpid())
	close(s.ready)
	s.state = stateRunning // as the sweep saw it: due, for swapOut to judge
	h.mu.Lock()
	h.sessions[s.name] = s
	h.mu.Unlock()
	outs, err := h.sweep(context.Background())
	require.NoError(t, err)
	require.Len(t, outs, 1)
	assert.Equal(t, wire.SwapKept, outs[0].Status)
	assert.Regexp(t, `^used \d+(\.\d+)?s ago \(swap_after_hours is 1\)$`, outs[0].Why)
	assert.Nil(t, s.serving, "no swap started")
}
