package hub

import (
	"bytes"
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/proto"
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

// Kept results hold at most keptRawBudget of raw output, the newest
// first; one that gave its up still answers under a smaller cap.
func TestKeptResultsRawBudget(t *testing.T) {
	s := newSession(testHub(t, testPaths(t)), "k")
	var runs []*run
	for c := 1; c <= 10; c++ {
		text := strings.Repeat(strconv.Itoa(c%10), UnreadCap)
		r := &run{cell: c, finished: make(chan struct{}), raw: &outBuf{},
			result: &wire.Result{Cell: c, Output: text[:ReplyCap], Stdout: text[:ReplyCap], Truncated: true}}
		close(r.finished)
		r.raw.write(true, []byte(text))
		runs = append(runs, r)
		s.keepLocked(r)
	}
	held := 0
	for _, r := range s.kept {
		if r.raw != nil {
			held += r.raw.size()
		}
	}
	assert.LessOrEqual(t, held, keptRawBudget)
	assert.NotNil(t, runs[9].raw, "the newest keeps its raw output")
	require.True(t, runs[0].raw == nil, "the oldest gave its raw output up")

	res := runs[0].resultUnder(1000)
	assert.LessOrEqual(t, len([]rune(res.Output)), 1200, "under the caller's cap")
	assert.True(t, res.Truncated)
	assert.LessOrEqual(t, len([]rune(res.Stdout)), 1200)
	assert.True(t, res.StdoutTruncated)
	assert.True(t, strings.HasPrefix(res.Output, "1111"))
	big := runs[9].resultUnder(MaxReplyCap)
	assert.Len(t, big.Output, UnreadCap, "the newest answers whole under the largest cap")
}

// hubWithSession is a hub with one started session, name, in its list.
func hubWithSession(t *testing.T, name string) (*Hub, *Session) {
	h := testHub(t, testPaths(t))
	s := startedSession(h, name, 0)
	close(s.ready)
	h.mu.Lock()
	h.sessions[name] = s
	h.mu.Unlock()
	return h, s
}

// A wait for a queued cell hears that the cell never ran, however it
// meets the death: from the note once the name is gone, or from the
// session it found alive just before the death ended its queue.
func TestWaitForACellQueuedAtDeath(t *testing.T) {
	h, s := hubWithSession(t, "d")
	s.mu.Lock()
	s.state = stateRunning
	s.cells = 2
	s.cur = &run{cell: 2, finished: make(chan struct{}), start: time.Now()}
	for range 2 {
		_, err := s.queueLocked("'never'", wire.Advice{})
		require.NoError(t, err)
	}
	s.mu.Unlock()
	h.sessionExited(s, Exit{Code: 3})

	res, err := h.waitOn(context.Background(), s, wire.Request{Name: "d", Cell: 3}, time.Now().Add(timeoutOf(0)), nil)
	require.NoError(t, err, "the session found just before it died")
	assert.Equal(t, wire.StatusDead, res.Status)
	assert.Equal(t, "session 'd' died before cell 3 ran (it was queued): exited with status 3", res.Death)

	res, err = h.Wait(context.Background(), wire.Request{Name: "d", Cell: 4}, nil)
	require.NoError(t, err, "the name found dead")
	assert.Equal(t, wire.StatusDead, res.Status)
	assert.Contains(t, res.Death, "died before cell 4 ran (it was queued)")

	_, err = h.Wait(context.Background(), wire.Request{Name: "d", Cell: 2}, nil)
	var we *wire.Error
	require.ErrorAs(t, err, &we, "the cell it died in is no queued one")
	assert.Equal(t, wire.CodeDead, we.Code)
}

// A list made while a death is being handled names the session, live or
// dead, never neither.
func TestListDuringADeath(t *testing.T) {
	h, s := hubWithSession(t, "d")
	s.mu.Lock() // the death's handling waits here, as behind a busy lock
	exited := make(chan struct{})
	go func() { defer close(exited); h.sessionExited(s, Exit{Code: 3}) }()
	time.Sleep(50 * time.Millisecond)
	listed := make(chan *wire.SessionList, 1)
	go func() { listed <- h.List() }()
	time.Sleep(50 * time.Millisecond)
	s.mu.Unlock()
	l := <-listed
	<-exited
	named := slices.ContainsFunc(l.Sessions, func(i wire.SessionInfo) bool { return i.Name == "d" }) ||
		slices.ContainsFunc(l.Dead, func(i wire.DeadInfo) bool { return i.Name == "d" })
	assert.True(t, named, "%+v", l)
	l = h.List()
	assert.Empty(t, l.Sessions)
	require.Len(t, l.Dead, 1)
	assert.Contains(t, l.Dead[0].Note, "exited with status 3")
}

// A queued cell that ends before its frame goes (a reattach found the
// worker without it: linkUp abandons it, "so it did not run") is not sent
// after all.
func TestQueuedCellEndedBeforeItsFrameIsNotSent(t *testing.T) {
	h := reachHub(t, map[string]string{"web": "lab-7"})
	s := h.sessions["web"]
	var frames bytes.Buffer
	s.w = proto.NewWriter(&frames) // read once sendCell returned
	r := &run{cell: 1, fence: newFence(), start: time.Now(), finished: make(chan struct{}), queued: true}
	s.mu.Lock()
	s.cur = r
	s.mu.Unlock()
	s.imu <- struct{}{} // sendCell waits for it
	sent := make(chan struct{})
	go func() { defer close(sent); s.sendCell(r, "1 + 1") }()
	s.mu.Lock()
	s.abandonLocked(r, "LinkDropped", "cell 1 never reached the session")
	s.mu.Unlock()
	<-s.imu
	select {
	case <-sent:
	case <-time.After(10 * time.Second):
		t.Fatal("sendCell did not return")
	}
	assert.Empty(t, frames.String(), "the frame of a cell said not to run went")
}
