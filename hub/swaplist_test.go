package hub

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The list reads a swap's record once, and again only when one of its
// files changed: a record rewritten, a pickle opened to others (then
// refused), a swap removed. A swap folder opened to others is refused for
// every line, cached or not.
func TestListSwappedKeepsLines(t *testing.T) {
	h := testHub(t, testPaths(t))
	put := func(name string, cells int) {
		t.Helper()
		dir, err := h.swapDir()
		require.NoError(t, err)
		part := filepath.Join(dir, name+".part")
		require.NoError(t, os.WriteFile(part, []byte("pickle"), 0o600))
		require.NoError(t, h.writeSwap(name, part, &swapRecord{Name: name, When: time.Now(), Host: "local", Python: "3.12.1", Cwd: "/w", Cells: cells}))
	}
	cellsOf := func() map[string]any {
		out := map[string]any{}
		for _, s := range h.listSwapped() {
			if s.Cwd != "/w" {
				out[s.Name] = s.Cwd // why it was refused
				continue
			}
			out[s.Name] = s.Cells
		}
		return out
	}
	put("a", 1)
	put("b", 2)
	assert.Equal(t, map[string]any{"a": 1, "b": 2}, cellsOf())

	// Changed in place, with its size and time as they were: the list
	// keeps the line it had, which shows it did not read the record.
	_, record := h.swapPaths("a")
	fi, err := os.Stat(record)
	require.NoError(t, err)
	b, err := os.ReadFile(record)
	require.NoError(t, err)
	var rec swapRecord
	require.NoError(t, json.Unmarshal(b, &rec))
	rec.Cells = 7
	b2, err := json.MarshalIndent(rec, "", "  ")
	require.NoError(t, err)
	require.Len(t, b2, len(b))
	f, err := os.OpenFile(record, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(b2, 0)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.NoError(t, os.Chtimes(record, fi.ModTime(), fi.ModTime()))
	assert.Equal(t, map[string]any{"a": 1, "b": 2}, cellsOf(), "kept")

	put("a", 13) // rewritten: another file
	assert.Equal(t, map[string]any{"a": 13, "b": 2}, cellsOf())

	pickle, _ := h.swapPaths("b")
	require.NoError(t, os.Chmod(pickle, 0o644))
	got := cellsOf()
	assert.Contains(t, got["b"], "has mode 0644", "checked again")
	require.NoError(t, os.Chmod(pickle, 0o600))
	assert.Equal(t, map[string]any{"a": 13, "b": 2}, cellsOf())

	require.NoError(t, os.Chmod(h.paths.SwapDir(), 0o755))
	for name, why := range cellsOf() {
		assert.Contains(t, why, "open to others", name)
	}
	require.NoError(t, os.Chmod(h.paths.SwapDir(), 0o700))

	h.removeSwap("a")
	assert.Equal(t, map[string]any{"b": 2}, cellsOf())
	h.swapList.mu.Lock()
	assert.Len(t, h.swapList.lines, 1, "a's line went with it")
	h.swapList.mu.Unlock()
}

// A line read before a swap was written or removed is not kept: a new
// swap may have the old one's key (an inode reused, whole-second times).
func TestSwapListingEpoch(t *testing.T) {
	var l swapListing
	epoch := l.now()
	l.changed("a")
	l.put("a", swapLine{}, epoch)
	_, ok := l.get("a")
	assert.False(t, ok, "read before a swap was written")
	l.put("a", swapLine{}, l.now())
	_, ok = l.get("a")
	assert.True(t, ok)
	l.changed("a")
	_, ok = l.get("a")
	assert.False(t, ok, "dropped as its swap changes")
}
