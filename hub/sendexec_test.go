package hub

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/proto"
	"github.com/replhub/replhub/remote"
	"github.com/replhub/replhub/tests/hubtest"
	"github.com/replhub/replhub/wire"
)

// A direct exec made its cell the session's, then stalled before its
// frame went, while a reattach found the worker without the cell and said
// it did not run: the frame must not go after that (it would run).
func TestExecEndedByAReattachIsNotSent(t *testing.T) {
	h := reachHub(t, map[string]string{"web": "lab-7"})
	s := h.sessions["web"]
	var frames bytes.Buffer
	s.w = proto.NewWriter(&frames)
	r := &run{cell: 1, fence: newFence(), start: time.Now(), finished: make(chan struct{}), collecting: 1}
	s.mu.Lock()
	s.cur, s.cells = r, 1
	s.mu.Unlock()
	s.linkUp(&proto.Ready{Cell: 0}, time.Now(), time.Now(), func() bool { return true })
	require.True(t, r.isFinished(), "the reattach did not end the cell")
	s.sendExec(r, "1 + 1")
	assert.Empty(t, frames.String(), "the frame of a cell said not to run went")
}

// gateWriter holds each Write until the gate opens.
type gateWriter struct {
	gate    chan struct{}
	writing chan struct{}
	buf     bytes.Buffer
}

func (g *gateWriter) Write(b []byte) (int, error) {
	select {
	case g.writing <- struct{}{}:
	default:
	}
	<-g.gate
	return g.buf.Write(b)
}

// A reattach's look at whether the worker had the cell waits for an exec
// frame under way, so that the two are in one order.
func TestReattachWaitsForAnExecFrameUnderWay(t *testing.T) {
	h := reachHub(t, map[string]string{"web": "lab-7"})
	s := h.sessions["web"]
	g := &gateWriter{gate: make(chan struct{}), writing: make(chan struct{}, 1)}
	s.w = proto.NewWriter(g)
	r := &run{cell: 1, fence: newFence(), start: time.Now(), finished: make(chan struct{}), collecting: 1}
	s.mu.Lock()
	s.cur, s.cells = r, 1
	s.mu.Unlock()
	sent := make(chan struct{})
	go func() { defer close(sent); s.sendExec(r, "1 + 1") }()
	select {
	case <-g.writing:
	case <-time.After(10 * time.Second):
		t.Fatal("the frame was not written")
	}
	up := make(chan struct{})
	go func() {
		defer close(up)
		s.linkUp(&proto.Ready{Cell: 0}, time.Now(), time.Now(), func() bool { return true })
	}()
	select {
	case <-up:
		t.Fatal("the reattach looked while the frame was under way")
	case <-time.After(200 * time.Millisecond):
	}
	close(g.gate)
	for _, ch := range []chan struct{}{sent, up} {
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatal("stuck")
		}
	}
	assert.Contains(t, g.buf.String(), `"op":"exec"`)
}

// While a link is down, the new one included until the session has heard
// of it (onUp), no frame goes: one that did would reach a worker whose
// ready frame the reattach is still reading.
func TestLinkWriterRefusesWhileDown(t *testing.T) {
	var link bytes.Buffer
	p := &linkProc{host: "lab-7", changed: make(chan struct{}), kick: make(chan struct{}, 1)}
	p.w, p.down = &link, true
	w := p.Stdin()
	_, err := w.Write([]byte("x\n"))
	assert.True(t, errors.Is(err, errLinkDown), "%v", err)
	fw := w.(interface {
		io.Writer
		BeginFrame()
		EndFrame()
	})
	fw.BeginFrame()
	_, err = fw.Write([]byte("y\n"))
	fw.EndFrame()
	assert.True(t, errors.Is(err, errLinkDown), "%v", err)
	assert.Empty(t, link.String())
	p.down = false
	_, err = w.Write([]byte("z\n"))
	require.NoError(t, err)
	assert.Equal(t, "z\n", link.String())
}

// linkSession is a reachHub session on a link of its own (no ssh): its
// frames go to the link's writer, link.
func linkSession(t *testing.T, link io.Writer) (*Session, *linkProc) {
	h := reachHub(t, map[string]string{"web": "lab-7"})
	s := h.sessions["web"]
	p := &linkProc{host: "lab-7", changed: make(chan struct{}), kick: make(chan struct{}, 1)}
	p.w = link
	s.proc = p
	s.w = proto.NewWriter(p.Stdin())
	return s, p
}

// oneRunningOneQueued is linkSession with cell 1 running, its frame not
// sent, cell 2 queued behind it, and the link down (a reattach under way).
func oneRunningOneQueued(t *testing.T, link io.Writer) (*Session, *linkProc, *run) {
	s, p := linkSession(t, link)
	r := &run{cell: 1, fence: newFence(), start: time.Now(), finished: make(chan struct{}), collecting: 1}
	s.mu.Lock()
	s.cur, s.cells, s.state = r, 1, stateRunning
	s.mu.Unlock()
	res, err := s.enqueue(context.Background(), "2", time.Second, true, 0, nil, wire.Advice{})
	require.NoError(t, err)
	require.Equal(t, 2, res.Cell)
	p.mu.Lock()
	p.down = true
	p.mu.Unlock()
	return s, p, r
}

// A reattach that ends a cell as never reached starts the queued one: its
// frame goes on the new link, once the look is made (markUp), not into a
// link still marked down, where it would be lost and the cell never end.
func TestQueuedCellAReattachStartsIsSent(t *testing.T) {
	var link hubtest.LockedBuffer
	s, p, r := oneRunningOneQueued(t, &link)
	s.linkUp(&proto.Ready{Cell: 0}, time.Now(), time.Now(), func() bool {
		// Before a frame that waits for the look can go.
		if s.sendMu.TryLock() {
			s.sendMu.Unlock()
			t.Error("the link was marked up after the look let exec frames go")
		}
		return p.markUp()
	})
	require.True(t, r.isFinished())
	require.Eventually(t, func() bool { return strings.Contains(link.String(), `"cell":2`) }, 5*time.Second, 5*time.Millisecond,
		"the queued cell's frame did not go: %q", link.String())
}

// exec's frame goes only while its cell has not ended: a reattach that
// ended it between the two (here while the test holds sendMu) keeps it.
func TestExecFrameWaitsForTheReattachsLook(t *testing.T) {
	var link hubtest.LockedBuffer
	s, _ := linkSession(t, &link)
	endedDuringTheLook(t, s, func() {
		s.exec(context.Background(), "1 + 1", time.Second, true, 0, nil, wire.Advice{})
	})
	assert.NotContains(t, link.String(), `"op":"exec"`, "the frame of a cell said not to run went")
}

// endedDuringTheLook holds sendMu as a reattach's look does, runs send
// on a goroutine, ends the session's cell (once there is one, and send
// has had time to wait for the lock) as the look does when the worker
// never had it, lets sendMu go, and waits for send to return.
func endedDuringTheLook(t *testing.T, s *Session, send func()) {
	t.Helper()
	s.sendMu.Lock()
	done := make(chan struct{})
	go func() { defer close(done); send() }()
	var r *run
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		r = s.cur
		return r != nil
	}, 5*time.Second, time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	s.mu.Lock()
	s.abandonLocked(r, "LinkDropped", fmt.Sprintf("cell %d never reached the session", r.cell))
	s.mu.Unlock()
	s.sendMu.Unlock()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the send did not return")
	}
}

// The frame sent again for a lost cell link waits for a reattach's look
// too, and does not go for a cell it ended.
func TestCellsLostWaitsForTheReattachsLook(t *testing.T) {
	var link hubtest.LockedBuffer
	s, p := linkSession(t, &link)
	p.gen, p.conn = 1, &remote.Conn{} // link 1, up
	r := &run{cell: 4, fence: newFence(), start: time.Now(), finished: make(chan struct{})}
	s.mu.Lock()
	s.cur = r
	s.mu.Unlock()
	keepCellsExec(s, r)
	endedDuringTheLook(t, s, func() { s.cellsLost(1) })
	assert.Empty(t, link.String(), "the frame of a cell said not to run went")
}

// keepCellsExec makes r's exec frame the one written last on the cell
// link, which cellsLost sends again.
func keepCellsExec(s *Session, r *run) {
	s.cellsMu.Lock()
	defer s.cellsMu.Unlock()
	s.cellsExec = &proto.Exec{Cell: r.cell, Code: "1", Fence: string(r.fence)}
}

// A cell link that ended alone on a link that has since dropped and come
// back: its last exec frame is not sent again on the new link, where the
// reattach has said already whether the worker had it (linkUp).
func TestCellsLostOnAnEarlierLinkSendsNothing(t *testing.T) {
	var link hubtest.LockedBuffer
	s, p := linkSession(t, &link)
	p.gen, p.conn = 2, &remote.Conn{} // the cell link was made on link 1; link 2 is up
	r := &run{cell: 4, fence: newFence(), start: time.Now(), finished: make(chan struct{})}
	s.mu.Lock()
	s.cur = r
	s.mu.Unlock()
	keepCellsExec(s, r)
	s.cellsLost(1)
	assert.Empty(t, link.String())

	// And a cell that ended lets its kept frame go.
	keepCellsExec(s, r)
	s.mu.Lock()
	s.abandonLocked(r, "X", "ended")
	s.mu.Unlock()
	s.cellsMu.Lock()
	defer s.cellsMu.Unlock()
	assert.Nil(t, s.cellsExec)
}

// A session killed as its link came back (Kill saw the link down, and
// could not tell the worker) keeps the link down: supervise tells the
// worker on it, which no frame of the session's then shares.
func TestMarkUpDeclinesAKilledSession(t *testing.T) {
	p := &linkProc{host: "lab-7", changed: make(chan struct{}), kick: make(chan struct{}, 1), down: true, gen: 3}
	p.killed = true
	assert.False(t, p.markUp())
	assert.True(t, p.down)
	assert.Equal(t, 3, p.gen)
	p.killed = false
	assert.True(t, p.markUp())
	assert.False(t, p.down)
	assert.Equal(t, 4, p.gen)
}

// A reattach's look at a session killed as its link came back neither
// calls its cell never reached nor starts the queued one: the session ends
// as killed.
func TestReattachOfAKilledSessionStartsNothing(t *testing.T) {
	var link hubtest.LockedBuffer
	s, p, r := oneRunningOneQueued(t, &link)
	p.mu.Lock()
	p.killed = true
	p.mu.Unlock()
	s.linkUp(&proto.Ready{Cell: 0}, time.Now(), time.Now(), p.markUp)
	assert.False(t, r.isFinished(), "the killed session's cell was called never reached")
	s.mu.Lock()
	cur, queued := s.cur, len(s.queue)
	s.mu.Unlock()
	assert.Same(t, r, cur)
	assert.Equal(t, 1, queued, "the queued cell started")
	assert.Empty(t, link.String())
}

// A kill during the reattach's look itself (after it read killed, before
// the link is marked up, which then declines): the cell it ended as never
// reached starts no queued one, which would be reported as the one the
// session died running.
func TestKillDuringTheLookStartsNothing(t *testing.T) {
	var link hubtest.LockedBuffer
	s, p, r := oneRunningOneQueued(t, &link)
	s.linkUp(&proto.Ready{Cell: 0}, time.Now(), time.Now(), func() bool {
		p.mu.Lock()
		p.killed = true
		p.mu.Unlock()
		return p.markUp()
	})
	require.True(t, r.isFinished())
	s.mu.Lock()
	cur, queued := s.cur, len(s.queue)
	s.mu.Unlock()
	assert.Same(t, r, cur, "the queued cell started")
	assert.Equal(t, 1, queued)
	assert.Empty(t, link.String())
}
