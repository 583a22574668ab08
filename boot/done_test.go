package boot

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A done frame whose header would pass the hub's bound goes without its
// display items, and so without their payload: its header announces none,
// and the session reads on in step. The cell's fence is written once, and
// the done frame sent again does not call the cell quiet: the hub must
// wait for that fence, which comes after the cell's output.
func TestDoneOverTheBoundDropsItsPayload(t *testing.T) {
	eachPython(t, func(t *testing.T, py string) {
		w := startWorker(t, py)
		w.run("x = 1", 20*time.Second)
		done := w.run("import replhub_toolkit.display as d; d.add('x' * (2 << 20), b'abc'); print('hi')", 20*time.Second)
		assert.Nil(t, done.h["display"], "%.200s", done.line)
		assert.Nil(t, done.h["len"], "%.200s", done.line)
		assert.Empty(t, done.data)
		assert.Equal(t, float64(1), done.h["dropped"], "%.200s", done.line)
		assert.Nil(t, done.h["quiet"], "%.200s", done.line)
		done = w.run("x + 1", 20*time.Second)
		assert.Equal(t, "2", done.str("value"))
	})
}

// A worker on this machine tells its memory in its first done frame only
// (the hub reads /proc for the rest), however long its cells take: the
// walk of its process tree would cost every cell after a pause a tenth
// of a millisecond.
func TestLocalWorkerTellsItsMemoryOnce(t *testing.T) {
	eachPython(t, func(t *testing.T, py string) {
		w := startWorker(t, py)
		done := w.run("x = 1", 20*time.Second)
		assert.Greater(t, done.num("rss"), int64(1<<20), "%.200s", done.line)
		done = w.run("import time; time.sleep(1.1)", 20*time.Second)
		assert.Equal(t, "ok", done.str("status"), "%.200s", done.line)
		assert.Nil(t, done.h["rss"], "%.200s", done.line)
	})
}
