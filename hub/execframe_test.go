package hub

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/proto"
	"github.com/replhub/replhub/wire"
)

// A done frame the hub does not take, or a run it ends without one, may
// have carried the session's names, which the worker then does not send
// again until they change: the next exec frame asks for them, once.
func TestExecFrameAsksForLostNames(t *testing.T) {
	h := testHub(t, testPaths(t))
	s := startedSession(h, "s", 1)
	r := &run{cell: 2, start: time.Now(), finished: make(chan struct{})}
	assert.False(t, s.execFrame(r, "1").Names)

	s.onDone(&proto.Done{Cell: 1, Names: []string{"x"}}) // no run of cell 1
	assert.Nil(t, s.names, "not taken")
	f := s.execFrame(r, "1")
	assert.Equal(t, proto.Exec{Cell: 2, Code: "1", Fence: string(r.fence), Names: true}, *f)
	assert.False(t, s.execFrame(r, "1").Names, "once")

	s.onDone(&proto.Done{Cell: 1}) // without names: none were lost
	assert.False(t, s.execFrame(r, "1").Names)

	s.cur = r
	s.mu.Lock()
	s.abandonLocked(r, "ResultLost", "lost")
	s.mu.Unlock()
	assert.True(t, s.execFrame(r, "1").Names)
}

// A reset's names are taken as its answer frame arrives, in the frame
// reader's order among the done frames', whether or not its caller still
// waits: a cell let go past the reset's budget may end beside it, and the
// worker sends the two lists in the order it made them.
func TestResetNamesTakenInFrameOrder(t *testing.T) {
	h := testHub(t, testPaths(t))
	s := startedSession(h, "s", 1)
	s.onAnswer(&proto.Answer{ID: 7, OK: true, Findings: wire.Findings{Names: []string{"a"}}})
	assert.Equal(t, []string{"a"}, s.names, "nobody waits for it: the names are still the session's")
	s.mu.Lock()
	s.cur = &run{cell: 2, start: time.Now(), finished: make(chan struct{})}
	s.mu.Unlock()
	s.onDone(&proto.Done{Cell: 2, Quiet: true, Names: []string{"a", "z"}})
	require.Equal(t, []string{"a", "z"}, s.names, "the cell's done frame, after the answer")
	s.onAnswer(&proto.Answer{ID: 8, OK: true})
	assert.Equal(t, []string{"a", "z"}, s.names, "an answer without names leaves them")
	s.onAnswer(&proto.Answer{ID: 9, Error: "no", Findings: wire.Findings{Names: []string{}}})
	assert.Equal(t, []string{"a", "z"}, s.names, "nor does a failed one")
	s.onAnswer(&proto.Answer{ID: 10, OK: true, Findings: wire.Findings{Names: []string{}}})
	assert.Equal(t, []string{}, s.names, "a reset that cleared them all")
}
