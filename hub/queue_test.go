package hub

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/wire"
)

func TestCellList(t *testing.T) {
	for _, c := range []struct {
		cells []int
		want  string
	}{
		{[]int{4}, "cell 4"},
		{[]int{3, 4}, "cells 3-4"},
		{[]int{3, 5}, "cells 3, 5"},
		{[]int{1, 2, 3, 7, 9, 10}, "cells 1-3, 7, 9-10"},
	} {
		assert.Equal(t, c.want, cellList(c.cells), "%v", c.cells)
	}
}

// TestTakeQueueOverBounds: the hand-over comes from a file on disk; what
// it holds past the hub's own bounds is not taken.
func TestTakeQueueOverBounds(t *testing.T) {
	h := reachHub(t, nil)
	s := newSession(h, "big")
	ho := &handover{}
	for c := 1; c <= 3*maxQueue; c++ {
		ho.Queue = append(ho.Queue, queuedCode{Cell: 100 + c, Code: "1"})
	}
	for c := 1; c <= 3*maxKept; c++ {
		ho.Kept = append(ho.Kept, &wire.Result{Cell: c})
	}
	ho.Kept = append(ho.Kept, nil)
	s.takeQueueOver(ho, 100)
	require.Len(t, s.queue, maxQueue)
	assert.Equal(t, 101, s.queue[0].cell, "the first cells keep their turn")
	require.Len(t, s.kept, maxKept)
	assert.Equal(t, 3*maxKept, s.kept[len(s.kept)-1].cell, "the latest results stay")
	assert.Contains(t, s.gone[100+3*maxQueue], "never ran")
}

// TestCheckCell: a negative cell number is refused in one line, by a
// single session's wait and interrupt and by a group's alike.
func TestCheckCell(t *testing.T) {
	h := testHub(t, testPaths(t))
	for _, n := range []int{0, 1, 7} {
		assert.NoError(t, checkCell(n))
	}
	for _, err := range []error{checkCell(-1), h.checkFanCell("ops", -3, wire.Advice{})} {
		require.Error(t, err)
		assert.True(t, wire.IsCode(err, wire.CodeBadRequest))
		assert.Equal(t, "a cell number is 1 or more", err.Error())
	}
}

// A kept result dropped past maxKept lets its raw output go, and a flood
// among it is reported for an early trim.
func TestKeptResultDroppedLetsItsOutputGo(t *testing.T) {
	s := newSession(testHub(t, testPaths(t)), "k")
	floods := 0
	s.out.let = func() { floods++ }
	var runs []*run
	for c := 1; c <= maxKept+1; c++ {
		r := &run{cell: c, finished: make(chan struct{}), result: &wire.Result{Cell: c}, raw: &outBuf{}}
		close(r.finished)
		if c == 1 {
			r.raw.write(true, bytes.Repeat([]byte("x"), floodSize))
		}
		runs = append(runs, r)
		s.keepLocked(r)
	}
	assert.Nil(t, runs[0].raw, "the dropped result's output")
	assert.Equal(t, 1, floods)
	assert.NotNil(t, runs[1].raw)
}
