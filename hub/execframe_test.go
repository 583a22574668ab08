package hub

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/replhub/replhub/proto"
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
