package hub

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/proto"
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
	s.linkUp(&proto.Ready{Cell: 0}, time.Now(), time.Now())
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
	go func() { defer close(up); s.linkUp(&proto.Ready{Cell: 0}, time.Now(), time.Now()) }()
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
