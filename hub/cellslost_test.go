package hub

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/replhub/replhub/proto"
)

// A cell link that ended alone on a link that has since dropped and come
// back: its last exec frame is not sent again on the new link, where the
// reattach has said already whether the worker had it (linkUp).
func TestCellsLostOnAnEarlierLinkSendsNothing(t *testing.T) {
	h := reachHub(t, map[string]string{"web": "lab-7"})
	s := h.sessions["web"]
	var frames bytes.Buffer
	s.w = proto.NewWriter(&frames)
	// The cell link was made on link 1; link 2 is up.
	s.proc = &linkProc{host: "lab-7", gen: 2, changed: make(chan struct{}), kick: make(chan struct{}, 1)}
	r := &run{cell: 4, fence: newFence(), start: time.Now(), finished: make(chan struct{})}
	s.mu.Lock()
	s.cur = r
	s.mu.Unlock()
	s.cellsMu.Lock()
	s.cellsExec = &proto.Exec{Cell: 4, Code: "1", Fence: string(r.fence)}
	s.cellsMu.Unlock()
	s.cellsLost(1)
	assert.Empty(t, frames.String())

	// And a cell that ended lets its kept frame go.
	s.cellsMu.Lock()
	s.cellsExec = &proto.Exec{Cell: 4, Code: "1", Fence: string(r.fence)}
	s.cellsMu.Unlock()
	s.mu.Lock()
	s.abandonLocked(r, "X", "ended")
	s.mu.Unlock()
	s.cellsMu.Lock()
	defer s.cellsMu.Unlock()
	assert.Nil(t, s.cellsExec)
}
