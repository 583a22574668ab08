package hub

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The readers put off by quick requests start once due unless stopped
// first, each once, from one timer that is armed again after it drained.
func TestAheadsStartOnlyWhatIsDue(t *testing.T) {
	var a aheads
	var started [4]atomic.Int32
	add := func(i int, after time.Duration) *ahead {
		return a.add(after, func() { started[i].Add(1) })
	}
	quick := add(0, 30*time.Millisecond)
	slow := add(1, 30*time.Millisecond)
	later := add(2, 200*time.Millisecond)
	assert.True(t, a.stop(quick), "a pending reader is stopped")
	assert.False(t, a.stop(quick), "twice")
	require.Eventually(t, func() bool { return started[1].Load() == 1 }, 5*time.Second, time.Millisecond)
	assert.False(t, a.stop(slow), "a reader that started is not stopped")
	assert.True(t, a.stop(later), "the one due later is pending still")

	// Drained, the timer is armed again by the next one.
	time.Sleep(250 * time.Millisecond)
	a.mu.Lock()
	assert.False(t, a.armed)
	assert.Empty(t, a.pending)
	a.mu.Unlock()
	add(3, 10*time.Millisecond)
	require.Eventually(t, func() bool { return started[3].Load() == 1 }, 5*time.Second, time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	for i, n := range []int32{0, 1, 0, 1} {
		assert.Equal(t, n, started[i].Load(), "reader %d", i)
	}
}
