package hub

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A trim comes after a tick without a new request, once the slack has
// grown by trimSlack since the last trim: once for an idle hub whose
// slack stays, again when output piles up under a request that goes on.
func TestTrimmer(t *testing.T) {
	var tr trimmer
	slack := int64(0)
	trims := 0
	tick := func(busy bool) {
		tr.tick(busy, func() int64 { return slack }, func() { trims++; slack /= 4 })
	}
	slack = 8 << 20
	tick(true)
	assert.Equal(t, 0, trims, "not while requests begin")
	tick(false)
	assert.Equal(t, 1, trims, "the first idle tick trims")
	for range 5 {
		tick(false)
	}
	assert.Equal(t, 1, trims, "what a trim could not return is not trimmed again and again")
	slack += trimSlack
	tick(false)
	assert.Equal(t, 2, trims, "slack that grew by trimSlack is trimmed, with no request begun")
	tick(true)
	slack = trimSlack
	tick(false)
	assert.Equal(t, 3, trims, "after a busy tick, the next idle one trims")
	slack = trimSlack - 1
	tick(true)
	tick(false)
	assert.Equal(t, 3, trims, "less than trimSlack is left alone")
}

// After a flood, a trim comes whatever the ticks say, once the slack is
// worth it.
func TestTrimmerFlood(t *testing.T) {
	var tr trimmer
	trims := 0
	slack := int64(trimSlack - 1)
	free := func() { trims++; slack = 0 }
	tr.flood(func() int64 { return slack }, free)
	assert.Equal(t, 0, trims, "less than trimSlack is left alone")
	slack = 20 << 20
	tr.tick(true, func() int64 { return slack }, free)
	tr.flood(func() int64 { return slack }, free)
	assert.Equal(t, 1, trims, "a flood is trimmed while requests begin")
	assert.False(t, tr.last.IsZero(), "the last trim is known, to space the next")
}

// Taking or dropping a flood's output tells the trimmer; a trivial
// cell's never does.
func TestFloodLetGo(t *testing.T) {
	lets := 0
	o := outputs{let: func() { lets++ }}
	o.write(true, []byte("small\n"))
	o.take()
	assert.Equal(t, 0, lets)
	o.write(true, make([]byte, floodSize))
	o.takeCap(10)
	assert.Equal(t, 1, lets)
	o.write(false, make([]byte, 2*floodSize))
	b := o.takeOut()
	assert.Equal(t, 1, lets, "a buffer taken out is not let go yet")
	o.letGo(b)
	assert.Equal(t, 2, lets)
}

// The gauge counts garbage and free pages the hub holds as slack, and
// after a trim, only what the collection could not return: the room left
// in spans still in use, which other tests' allocations leave behind, so
// the bound after a trim is taken against the slack of the first trim.
func TestHeapGauge(t *testing.T) {
	var g heapGauge
	// Other tests' goroutines may allocate meanwhile: bounds with room,
	// and no collection but the trims' own.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	debug.FreeOSMemory()
	g.settle()
	assert.NotZero(t, g.live)
	base := g.slack()
	assert.Less(t, base, int64(16<<20), "just after a trim")
	garbage := make([][]byte, 256)
	for i := range garbage {
		garbage[i] = make([]byte, 128<<10)
	}
	runtime.KeepAlive(garbage)
	garbage = nil
	// With no collection, the heap holds at least the live heap of the
	// trim and the 32 MiB since; their pages may be ones the base counted.
	assert.GreaterOrEqual(t, g.slack(), int64(32<<20), "32 MiB let go and not yet collected")
	debug.FreeOSMemory()
	g.settle()
	assert.Less(t, g.slack(), base+4<<20, "after the trim that returned it")
}

// The code start-up ran is released only while no session runs a cell.
func TestAnyRunning(t *testing.T) {
	h := reachHub(t, map[string]string{"a": "local", "b": "local"})
	assert.False(t, h.anyRunning(), "every session idle")
	s := h.sessions["b"]
	s.mu.Lock()
	s.state = stateRunning
	s.mu.Unlock()
	assert.True(t, h.anyRunning(), "b runs a cell")
}

// The start-up code goes at a tick with no request begun and no cell
// running, or after releaseCodeBy whatever runs.
func TestReleaseNow(t *testing.T) {
	running := func() bool { return true }
	idle := func() bool { return false }
	assert.True(t, releaseNow(false, idle, time.Second))
	assert.False(t, releaseNow(true, idle, time.Second), "a request began")
	assert.False(t, releaseNow(false, running, time.Second), "a cell runs")
	assert.True(t, releaseNow(false, running, releaseCodeBy+time.Second), "a cell that never ends")
	assert.False(t, releaseNow(true, running, releaseCodeBy+time.Second), "a request began")
}
