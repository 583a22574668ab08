package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replhub/replhub/proto"
	"github.com/replhub/replhub/remote"
	"github.com/replhub/replhub/wire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// shortStall makes relayStall d for one test.
func shortStall(t *testing.T, d time.Duration) {
	old := relayStall
	relayStall = d
	t.Cleanup(func() { relayStall = old })
}

// shortLookupSwapWait sets lookup's wait for a swap under way to d for
// the test.
func shortLookupSwapWait(t *testing.T, d time.Duration) {
	old := lookupSwapWait
	lookupSwapWait = d
	t.Cleanup(func() { lookupSwapWait = old })
}

// busyWith is what keeps s busy ("" when idle), read under its lock.
func busyWith(s *Session) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.busyWithLocked()
}

// gatedWorker stands in for a worker that stops reading its stdin: the
// frames the hub writes s are read only while the gate lets them through.
// It returns the frames read, in order, and the gate (shut at first).
func gatedWorker(t *testing.T, s *Session) (<-chan sentFrame, *gate) {
	t.Helper()
	return gatedWorkerAs(t, s, proto.NewWriter)
}

// gatedWorkerAs is gatedWorker with s's writer made by newWriter.
func gatedWorkerAs(t *testing.T, s *Session, newWriter func(io.Writer) *proto.Writer) (<-chan sentFrame, *gate) {
	t.Helper()
	g := &gate{open: make(chan struct{}), ended: make(chan struct{})}
	t.Cleanup(func() { close(g.ended) })
	return framesThroughAs(t, s, newWriter, g.reader), g
}

// gate holds reads back until it opens; before that, let lets n more
// bytes through. Once ended, a read held back ends with io.EOF.
type gate struct {
	open, ended chan struct{}
	let         atomic.Int64
}

func (g *gate) reader(r io.Reader) io.Reader { return gateReader{g, r} }

type gateReader struct {
	g *gate
	r io.Reader
}

func (gr gateReader) Read(p []byte) (int, error) {
	for gr.g.let.Load() <= 0 {
		select {
		case <-gr.g.open:
			return gr.r.Read(p)
		case <-gr.g.ended:
			return 0, io.EOF
		case <-time.After(time.Millisecond):
		}
	}
	n := min(int64(len(p)), gr.g.let.Load())
	k, err := gr.r.Read(p[:n])
	gr.g.let.Add(-int64(k))
	return k, err
}

// trickle lets n more bytes through every 100 ms until the test ends: a
// worker that reads slowly but steadily.
func (g *gate) trickle(t *testing.T, n int64) {
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
				g.let.Add(n)
			}
		}
	}()
}

func nextFrame(t *testing.T, frames <-chan sentFrame) sentFrame {
	t.Helper()
	select {
	case f, ok := <-frames:
		require.True(t, ok, "the worker's stream ended")
		return f
	case <-time.After(10 * time.Second):
		t.Fatal("no frame came")
		return sentFrame{}
	}
}

func stallSession(t *testing.T) *Session {
	s := newSession(&Hub{log: slog.New(slog.NewTextHandler(io.Discard, nil))}, "b")
	close(s.ready)
	return s
}

// A relay to a worker that reads nothing gives up after relayStall,
// leaves the frame to finish whole once the worker reads again, and the
// next relay goes through.
func TestRelaySendStalled(t *testing.T) {
	shortStall(t, 200*time.Millisecond)
	s := stallSession(t)
	frames, g := gatedWorker(t, s)
	data := proto.GetChunk(proto.ChunkSize)
	for i := range data {
		data[i] = byte(i)
	}
	t0 := time.Now()
	err := s.relaySend(&proto.Chunk{Sid: 3, Seq: 0, Data: data}, nil)
	took := time.Since(t0)
	assert.ErrorIs(t, err, errStalled)
	assert.GreaterOrEqual(t, took, relayStall)
	assert.Less(t, took, relayStall+5*time.Second)

	close(g.open)
	f := nextFrame(t, frames)
	require.Equal(t, "chunk", f.op)
	require.Len(t, f.data, proto.ChunkSize, "the stalled frame went whole")
	for i := 0; i < len(f.data); i += 4099 {
		require.Equal(t, byte(i), f.data[i])
	}
	require.NoError(t, s.relaySend(&proto.Ack{Sid: 3, Seq: 0}, nil))
	assert.Equal(t, "ack", nextFrame(t, frames).op)
}

// A relay whose link fails while its frame waits returns at once, taken
// by the relay writer or not: the frame that the writer took goes whole
// once the worker reads again (errPending), the one it had not taken
// never goes (errLinkFailed).
func TestRelaySendLinkFailed(t *testing.T) {
	shortStall(t, time.Hour)
	s := stallSession(t)
	frames, g := gatedWorker(t, s)
	failed := make(chan struct{})
	taken, untaken := make(chan error, 1), make(chan error, 1)
	go func() {
		taken <- s.relaySend(&proto.Chunk{Sid: 3, Seq: 7, Data: proto.GetChunk(proto.ChunkSize)}, failed)
	}()
	time.Sleep(100 * time.Millisecond) // the relay writer has the first, and waits
	go func() {
		untaken <- s.relaySend(&proto.Chunk{Sid: 3, Seq: 8, Data: proto.GetChunk(proto.ChunkSize)}, failed)
	}()
	time.Sleep(50 * time.Millisecond)
	close(failed)
	for _, c := range []struct {
		sent chan error
		want error
	}{{taken, errPending}, {untaken, errLinkFailed}} {
		select {
		case err := <-c.sent:
			assert.ErrorIs(t, err, c.want)
		case <-time.After(5 * time.Second):
			t.Fatal("a relay still waits after its link failed")
		}
	}
	close(g.open)
	f := nextFrame(t, frames)
	require.Equal(t, "chunk", f.op)
	assert.Contains(t, string(f.line), `"seq":7`)
	assert.Len(t, f.data, proto.ChunkSize, "the frame the writer had went whole")
	require.NoError(t, s.relaySend(&proto.Ack{Sid: 3}, nil))
	assert.Equal(t, "ack", nextFrame(t, frames).op, "the untaken chunk was dropped")
}

// putToStopped starts a put of 3 chunks from from (request 5) into stuck,
// which reads its serve frame (g lets it through), is ready for the
// chunks (from is told so), and then stops reading. It returns the serve.
func putToStopped(t *testing.T, h *Hub, from, stuck *Session, frames <-chan sentFrame, g *gate, replies chan *proto.Reply) proto.Serve {
	t.Helper()
	g.let.Store(1 << 30)
	go h.serveRequest(from, &proto.Req{ID: 5, Kind: "put", Target: stuck.name, Names: []string{"x"}, Bufs: []int64{3 * proto.ChunkSize}})
	serve := nextFrame(t, frames)
	require.Equal(t, "serve", serve.op)
	var sv proto.Serve
	require.NoError(t, json.Unmarshal(serve.line, &sv))
	g.let.Store(0)
	stuck.onServed(&proto.Served{Sid: sv.Sid, OK: true, First: true})
	require.True(t, relayedReply(t, replies).First, "the target is ready")
	return sv
}

// cellPutting gives session 'web' running cell 1, whose put to 't0' has
// begun, and the gate in front of t0's worker, shut.
func cellPutting(t *testing.T) (*Session, *gate) {
	t.Helper()
	shortStall(t, time.Hour)
	h, from, replies, targets := relayHub(t, "t%d", 1)
	target := h.sessions[targets[0]]
	frames, g := gatedWorker(t, target)
	putToStopped(t, h, from, target, frames, g, replies)
	r := &run{cell: 1, fence: newFence(), start: time.Now(), finished: make(chan struct{})}
	from.mu.Lock()
	from.cur = r
	from.mu.Unlock()
	return from, g
}

// onReader has from take ms as its frame reader does, on a goroutine of
// its own, the first a chunk that holds the reader up; it returns once
// the reader relays that chunk and what a pipe takes of it has gone, with
// a channel closed once all of ms are taken.
func onReader(t *testing.T, from *Session, ms ...proto.Msg) <-chan struct{} {
	t.Helper()
	read := make(chan struct{})
	go func() {
		for _, m := range ms {
			from.takeFrame(m)
		}
		close(read)
	}()
	require.Eventually(t, func() bool { return from.relaying.Load() != nil }, 5*time.Second, time.Millisecond)
	time.Sleep(200 * time.Millisecond)
	return read
}

// An interrupt frees the caller's frame reader from a chunk relayed to a
// session that takes none by failing that request only, once the reader
// has held it for half of interruptWait: the caller's other request, to
// a session that is merely slow to answer, goes on.
func TestInterruptDropsTheStalledRelayOnly(t *testing.T) {
	shortStall(t, time.Hour)
	h, from, replies, targets := relayHub(t, "t%d", 2)
	stuck, other := h.sessions[targets[0]], h.sessions[targets[1]]
	frames, g := gatedWorker(t, stuck)
	// other answers nothing yet.
	fakeWorker(t, other, func(*proto.Serve) *proto.Served { return nil }, nil)
	putToStopped(t, h, from, stuck, frames, g, replies)
	go h.serveRequest(from, &proto.Req{ID: 6, Kind: "put", Target: other.name, Names: []string{"y"}, Data: []byte("blob")})
	require.Eventually(t, func() bool { return busyWith(other) != "" }, 5*time.Second, time.Millisecond)

	read := onReader(t, from, &proto.Chunk{ID: 5, Seq: 0, Data: proto.GetChunk(proto.ChunkSize)})
	probe := probeLink(from.relaying.Load())
	d, watch := from.dropStalled(from.relaying.Load(), &probe)
	assert.Empty(t, d, "held for less than half of interruptWait")
	assert.True(t, watch)
	time.Sleep(interruptWait/2 + 100*time.Millisecond)
	d, _ = from.dropStalled(from.relaying.Load(), &probe)
	assert.Regexp(t, `^the put to 't0' was dropped: 't0' took none of its data for 1\.[0-9]s \(stopped, or in code that holds the interpreter\?\)$`, d)
	select {
	case <-read:
	case <-time.After(5 * time.Second):
		t.Fatal("the reader is still held")
	}
	r := relayedReply(t, replies)
	assert.Equal(t, int64(5), r.ID)
	assert.Regexp(t, `^session 't0' took none of the put's data for 1\.[0-9]s when 'web' was interrupted; the put is dropped$`, r.Error)
	d, watch = from.dropStalled(from.relaying.Load(), &probe)
	assert.Empty(t, d, "nothing holds the reader now")
	assert.False(t, watch)
	select {
	case r := <-replies:
		t.Fatalf("a reply to another request: %+v", r)
	case <-time.After(200 * time.Millisecond):
	}
	assert.Contains(t, busyWith(other), "serving a put from 'web'", "the other request goes on")
	other.mu.Lock()
	sid := other.serving.sid
	other.mu.Unlock()
	other.onServed(&proto.Served{Sid: sid, OK: true})
	assert.True(t, relayedReply(t, replies).OK)
}

// A worker that reads slowly but steadily is not stalled, however long
// the whole frame takes, nor however long a MiB of it takes: here 1.6
// relayStall, as over a remote session's link at 30 kB/s under a hub's
// 20 s.
func TestRelaySendSlowIsNotStalled(t *testing.T) {
	shortStall(t, time.Second)
	s := stallSession(t)
	frames, g := gatedWorker(t, s)
	g.trickle(t, 64<<10)
	t0 := time.Now()
	require.NoError(t, s.relaySend(&proto.Chunk{Sid: 3, Data: make([]byte, 2<<20)}, nil))
	assert.Greater(t, time.Since(t0), relayStall, "the frame took longer than relayStall")
	assert.Equal(t, "chunk", nextFrame(t, frames).op)
}

// A relay to a session that has ended says so at once.
func TestRelaySendGone(t *testing.T) {
	shortStall(t, time.Hour)
	s := stallSession(t)
	gatedWorker(t, s)
	close(s.exited)
	assert.ErrorIs(t, s.relaySend(&proto.Ack{Sid: 1}, nil), errGone)
}

// A put whose target stops reading mid-transfer fails alone: the caller
// is answered with the reason within relayStall, its later chunks are
// dropped without a wait, another session serves it meanwhile, and the
// target stays busy until, reading again, it gets the stalled chunk whole,
// then the cancel, and answers.
func TestRelayStallFailsTheLink(t *testing.T) {
	shortStall(t, 300*time.Millisecond)
	h, from, replies, targets := relayHub(t, "t%d", 2)
	stuck, other := h.sessions[targets[0]], h.sessions[targets[1]]
	frames, g := gatedWorker(t, stuck)
	fakeWorker(t, other, func(sv *proto.Serve) *proto.Served { return &proto.Served{Sid: sv.Sid, OK: true} }, nil)
	sv := putToStopped(t, h, from, stuck, frames, g, replies)
	reply := func() *proto.Reply { return relayedReply(t, replies) }

	t0 := time.Now()
	from.onChunk(&proto.Chunk{ID: 5, Seq: 0, Data: proto.GetChunk(proto.ChunkSize)}) // on from's reader
	assert.Less(t, time.Since(t0), relayStall+5*time.Second, "the caller's reader is held up at most relayStall")
	last := reply()
	assert.False(t, last.First)
	assert.Equal(t, "session 't0' took none of the put's data for 0.3s: is it stopped (SIGSTOP) or stuck in C code? interrupt or kill it", last.Error)
	t0 = time.Now()
	from.onChunk(&proto.Chunk{ID: 5, Seq: 1, Data: proto.GetChunk(proto.ChunkSize)})
	assert.Less(t, time.Since(t0), relayStall/2, "a failed link's chunks are dropped")

	go h.serveRequest(from, &proto.Req{ID: 6, Kind: "put", Target: other.name, Names: []string{"y"}, Data: []byte("blob")})
	r := reply()
	assert.Equal(t, int64(6), r.ID)
	assert.True(t, r.OK, "the caller goes on with another session: %s", r.Error)

	assert.Contains(t, busyWith(stuck), "serving a put from 'web'", "a target still mid-serve stays busy")

	close(g.open)
	f := nextFrame(t, frames)
	require.Equal(t, "chunk", f.op)
	assert.Len(t, f.data, proto.ChunkSize)
	f = nextFrame(t, frames)
	require.Equal(t, "cancel", f.op, "the cancel follows the stalled chunk")
	var c proto.Cancel
	require.NoError(t, json.Unmarshal(f.line, &c))
	assert.Equal(t, sv.Sid, c.Sid)
	assert.Contains(t, busyWith(stuck), "serving a put")
	stuck.onServed(&proto.Served{Sid: sv.Sid, Error: "cancelled"})
	assert.Eventually(t, func() bool { return busyWith(stuck) == "" }, 5*time.Second, 10*time.Millisecond, "it is free once it answered")
	select {
	case f := <-frames:
		t.Fatalf("a frame after the cancel: %s", f.line)
	case <-time.After(100 * time.Millisecond):
	}
}

// A cancel asked before the serve frame went follows it, once, however
// often it is asked.
func TestCancelFollowsTheServe(t *testing.T) {
	shortStall(t, 5*time.Second)
	h, _, _, targets := relayHub(t, "t%d", 1)
	target := h.sessions[targets[0]]
	frames := framesTo(t, target)
	op, err := h.beginServe(target, "get", "web")
	require.NoError(t, err)
	op.cancel()
	op.cancel()
	select {
	case f := <-frames:
		t.Fatalf("a frame before the serve: %s", f.line)
	case <-time.After(100 * time.Millisecond):
	}
	require.NoError(t, sendServe(target, &proto.Serve{Sid: op.sid, Kind: "get"}, op, nil))
	assert.Equal(t, "serve", nextFrame(t, frames).op)
	assert.Equal(t, "cancel", nextFrame(t, frames).op)
	op.cancel()
	select {
	case f := <-frames:
		t.Fatalf("a second cancel: %s", f.line)
	case <-time.After(100 * time.Millisecond):
	}
}

// A request id in use is refused at once, and free again once its
// request ended.
func TestRequestIDInUse(t *testing.T) {
	_, from, replies, targets := relayHub(t, "t%d", 1)
	_, stop, err := from.runningAs(7)
	require.NoError(t, err)
	_, _, err = from.runningAs(7)
	assert.ErrorContains(t, err, "request id 7 is in use")

	from.takeRequest(&proto.Req{ID: 7, Kind: "get", Target: targets[0], Names: []string{"x"}})
	r := relayedReply(t, replies)
	assert.Equal(t, int64(7), r.ID)
	assert.Contains(t, r.Error, "request id 7 is in use")
	stop()
	_, stop, err = from.runningAs(7)
	require.NoError(t, err)
	stop()
}

// A worker that sends past its window never blocks the reader that
// queues its chunks: the rest is dropped and the link told, once.
func TestQueuedNeverBlocks(t *testing.T) {
	release := make(chan struct{})
	var full atomic.Int32
	enqueue, stop := queued(func(c *proto.Chunk) { <-release }, func() { full.Add(1) })
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 3*queueRoom; i++ {
			enqueue(&proto.Chunk{Seq: int64(i)})
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("enqueue blocked")
	}
	assert.Eventually(t, func() bool { return full.Load() == 1 }, 5*time.Second, time.Millisecond)
	close(release)
	stop()
	assert.Equal(t, int32(1), full.Load())
}

// holdWriter leaves s's relay writer stuck on a chunk s takes none of,
// as for a transfer it asked for when it stopped reading.
func holdWriter(t *testing.T, s *Session) {
	t.Helper()
	require.ErrorIs(t, s.relaySend(&proto.Chunk{ID: 99, Data: proto.GetChunk(proto.ChunkSize)}, nil), errStalled)
}

// A serve frame that never left the hub, its target's relay writer
// being stuck on another frame, fails the request and leaves the target
// free: it will never answer a serve it never got.
func TestStalledServeNeverSentFreesTheTarget(t *testing.T) {
	shortStall(t, 300*time.Millisecond)
	h, from, replies, targets := relayHub(t, "t%d", 1)
	stuck := h.sessions[targets[0]]
	frames, g := gatedWorker(t, stuck)
	holdWriter(t, stuck)

	go h.serveRequest(from, &proto.Req{ID: 5, Kind: "put", Target: stuck.name, Names: []string{"x"}, Data: []byte("blob")})
	r := relayedReply(t, replies)
	assert.Contains(t, r.Error, "session 't0' took none of the put's data")
	assert.Eventually(t, func() bool { return busyWith(stuck) == "" }, 5*time.Second, 10*time.Millisecond, "the target is free")

	close(g.open)
	require.Equal(t, "chunk", nextFrame(t, frames).op)
	select {
	case f := <-frames:
		t.Fatalf("a frame for the failed put: %s", f.line)
	case <-time.After(200 * time.Millisecond):
	}
	assert.Empty(t, busyWith(stuck), "the target is still free once it reads again")
}

// A pull whose target takes not even its serve frame is answered with a
// reply, which the caller waits for, not with the end of a transfer it
// never heard had begun.
func TestPullStalledBeforeItsAnswerIsAReply(t *testing.T) {
	shortStall(t, 300*time.Millisecond)
	h, from, replies, targets := relayHub(t, "t%d", 1)
	stuck := h.sessions[targets[0]]
	gatedWorker(t, stuck)

	go h.serveRequest(from, &proto.Req{ID: 5, Kind: "pull", Target: stuck.name, Path: "/etc/hostname"})
	r := relayedReply(t, replies)
	assert.Equal(t, int64(5), r.ID)
	assert.Contains(t, r.Error, "session 't0' took none of the pull's data")
}

// A session's pull or push from a session that reads the serve but never
// answers it (stuck in C code, say) fails after relayStall with a reply
// that says so, as a client's does; the target is told to stop, and is
// free again once it says it has.
func TestFileServeUnansweredIsAReply(t *testing.T) {
	shortStall(t, 300*time.Millisecond)
	for _, kind := range []string{"pull", "push"} {
		t.Run(kind, func(t *testing.T) {
			h, from, replies, targets := relayHub(t, "t%d", 1)
			silent := h.sessions[targets[0]]
			frames := framesTo(t, silent) // read, never answered
			t0 := time.Now()
			go h.serveRequest(from, &proto.Req{ID: 5, Kind: kind, Target: silent.name, Path: "/tmp/x", Size: 1})
			var sv proto.Serve
			require.NoError(t, json.Unmarshal(nextFrame(t, frames).line, &sv))
			r := relayedReply(t, replies)
			assert.Equal(t, int64(5), r.ID)
			assert.Contains(t, r.Error, fmt.Sprintf("session 't0' did not answer the %s for 0.3s: is it stopped (SIGSTOP), stuck in C code, or blocked opening the file (a FIFO, a hung mount)?", kind))
			assert.Less(t, time.Since(t0), 5*time.Second)
			assert.Equal(t, "cancel", nextFrame(t, frames).op, "the target is told to stop")
			silent.onServed(&proto.Served{Sid: sv.Sid, Error: "cancelled"})
			require.Eventually(t, func() bool { return busyWith(silent) == "" }, 10*time.Second, 10*time.Millisecond, "the target is free again")
		})
	}
}

// A pull whose caller stops reading as its target answers: the caller
// gets, once it reads again, a reply saying why, since the first answer
// never went.
func TestPullWhoseCallerStallsBeforeItsAnswerIsAReply(t *testing.T) {
	shortStall(t, 300*time.Millisecond)
	h, from, _, targets := relayHub(t, "t%d", 1)
	target := h.sessions[targets[0]]
	fakeWorker(t, target, func(sv *proto.Serve) *proto.Served { return &proto.Served{Sid: sv.Sid, OK: true, Size: 1} }, nil)
	frames, g := gatedWorker(t, from)
	holdWriter(t, from)

	go h.serveRequest(from, &proto.Req{ID: 5, Kind: "pull", Target: target.name, Path: "/etc/hostname"})
	assert.Eventually(t, func() bool {
		link := from.linkOf(5)
		return link != nil && link.op.err() != nil
	}, 10*time.Second, 10*time.Millisecond, "the link failed")
	close(g.open)
	require.Equal(t, "chunk", nextFrame(t, frames).op, "the held chunk")
	f := nextFrame(t, frames)
	require.Equal(t, "reply", f.op, "%s", f.line)
	var r proto.Reply
	require.NoError(t, json.Unmarshal(f.line, &r))
	assert.Equal(t, int64(5), r.ID)
	assert.Contains(t, r.Error, "session 'web' took none of the pull's data")
}

// A target that answers more than asked and dies while its caller's last
// chunks are still on their way: its death is handled, and the caller
// answered, however full the serve's answers are.
func TestServeFloodThenDeath(t *testing.T) {
	shortStall(t, time.Second)
	h, from, _, targets := relayHub(t, "t%d", 1)
	target := h.sessions[targets[0]]
	served := framesTo(t, target)
	frames, g := gatedWorker(t, from)
	g.let.Store(4 << 10) // the first answer goes, not the chunk after it

	go h.serveRequest(from, &proto.Req{ID: 5, Kind: "get", Target: target.name, Names: []string{"x"}, Oob: true})
	var sv proto.Serve
	require.NoError(t, json.Unmarshal(nextFrame(t, served).line, &sv))
	target.onServed(&proto.Served{Sid: sv.Sid, OK: true, First: true, Bufs: []int64{proto.ChunkSize}})
	require.True(t, nextReply(t, frames).First)
	target.onChunk(&proto.Chunk{Sid: sv.Sid, Data: proto.GetChunk(proto.ChunkSize)})
	target.onServed(&proto.Served{Sid: sv.Sid, OK: true})
	for range 4 {
		target.onServed(&proto.Served{Sid: sv.Sid, OK: true})
	}
	die(t, h, target)
	close(g.open)
	last := nextReply(t, frames)
	assert.Equal(t, int64(5), last.ID)
	assert.False(t, last.First)
}

// A target that floods first answers while its caller stalls, and then
// dies, or its link drops (the worker drops the serve then), with them
// unread: the serve still ends, and nothing waits on it.
func TestServeFloodOfFirstsThenDeath(t *testing.T) {
	for _, end := range []string{"death", "link down"} {
		t.Run(end, func(t *testing.T) {
			shortStall(t, 500*time.Millisecond)
			h, from, _, targets := relayHub(t, "t%d", 1)
			target := h.sessions[targets[0]]
			served := framesTo(t, target)
			gatedWorker(t, from)

			go h.serveRequest(from, &proto.Req{ID: 5, Kind: "get", Target: target.name, Names: []string{"x"}, Oob: true})
			var sv proto.Serve
			require.NoError(t, json.Unmarshal(nextFrame(t, served).line, &sv))
			op := from.linkOf(5).op
			go func() {
				for range 1 + cap(op.done) {
					target.onServed(&proto.Served{Sid: sv.Sid, OK: true, First: true})
				}
			}()
			require.Eventually(t, func() bool { return len(op.done) == cap(op.done) }, 5*time.Second, time.Millisecond)
			if end == "death" {
				die(t, h, target)
				close(target.exited) // as waitExit does next
			} else {
				target.linkDown(time.Now(), errors.New("connection reset"))
			}
			select {
			case <-op.ended:
			case <-time.After(10 * time.Second):
				t.Fatal("the serve never ended")
			}
		})
	}
}

// die handles target's death as its waiter does, and fails t unless that
// ends within relayStall/2.
func die(t *testing.T, h *Hub, target *Session) {
	t.Helper()
	died := make(chan struct{})
	go func() {
		h.sessionExited(target, Exit{Code: 1})
		close(died)
	}()
	select {
	case <-died:
	case <-time.After(relayStall / 2):
		t.Fatal("the target's death is not handled")
	}
}

// nextReply is the next reply among frames, skipping chunks.
func nextReply(t *testing.T, frames <-chan sentFrame) *proto.Reply {
	t.Helper()
	for {
		f := nextFrame(t, frames)
		if f.op == "reply" {
			var r proto.Reply
			require.NoError(t, json.Unmarshal(f.line, &r))
			return &r
		}
	}
}

// partServing has session "web" ask a group's get of one member (or, not
// group, a get of that session alone), which serves it with a value of one
// chunk, and returns the member, its serve, and the gate in front of web's
// worker (open until the caller shuts it). With first, the member's First
// answer (the value's pickle) has reached web; without, it is the
// caller's to give, on the member's reader.
func partServing(t *testing.T, group, first bool) (target *Session, sv *proto.Serve, g *gate) {
	t.Helper()
	shortStall(t, time.Hour)
	h, from, _, targets := relayHub(t, "g@lab-7-%d", 1)
	target = h.sessions[targets[0]]
	serves := make(chan *proto.Serve, 1)
	fakeWorker(t, target, func(sv *proto.Serve) *proto.Served { serves <- sv; return nil }, nil)
	frames, g := gatedWorker(t, from)
	g.let.Store(1 << 30)
	if group {
		go h.serveRequest(from, &proto.Req{ID: 7, Kind: "get", Names: []string{"x"}, Oob: true, Targets: targets})
	} else {
		go h.serveRequest(from, &proto.Req{ID: 7, Kind: "get", Names: []string{"x"}, Oob: true, Target: targets[0]})
	}
	sv = <-serves
	if first {
		target.onServed(valueFirst(sv))
		require.Equal(t, "reply", nextFrame(t, frames).op, "the value's pickle, its buffers to follow")
	}
	return target, sv, g
}

// valueFirst is a target's First answer to serve sv: its value's pickle
// (64 KiB, more than a read the gate let start before it shut takes),
// one chunk of buffers to follow.
func valueFirst(sv *proto.Serve) *proto.Served {
	return &proto.Served{Sid: sv.Sid, OK: true, First: true, Py: "3.12", Bufs: []int64{proto.ChunkSize}, Data: make([]byte, 64<<10)}
}

// An interrupt of a session that serves a group's part, whose chunks its
// reader relays to a caller that stopped reading, drops that part and
// answers at once, rather than say the session did not stop. So it does
// when the caller stopped before the part's First answer reached it (the
// chunk then waits for that answer, on the reader, as long), and for a
// single get, whose chunks wait in a queue off the reader.
func TestInterruptOfAServeBehindAStoppedCaller(t *testing.T) {
	for _, c := range []struct{ group, first bool }{{true, true}, {true, false}, {false, true}} {
		t.Run(fmt.Sprintf("group %v, first answer taken %v", c.group, c.first), func(t *testing.T) {
			target, sv, g := partServing(t, c.group, c.first)
			g.let.Store(0) // the caller stops reading
			var frames []proto.Msg
			if !c.first {
				frames = append(frames, valueFirst(sv))
			}
			frames = append(frames, &proto.Chunk{Sid: sv.Sid, Seq: 0, Data: proto.GetChunk(proto.ChunkSize)}, &proto.Served{Sid: sv.Sid, Error: "KeyboardInterrupt"})
			if c.group {
				onReader(t, target, frames...)
			} else {
				for _, f := range frames {
					target.takeFrame(f) // the chunk only queued
				}
				op := target.servingOp(sv.Sid)
				require.NotNil(t, op)
				require.Eventually(t, func() bool { return op.toCaller.Load() != nil }, 5*time.Second, time.Millisecond)
			}
			t0 := time.Now()
			msg, err := target.interrupt(wire.Advice{}, false, 0)
			require.NoError(t, err)
			// A round, or two where the caller took the frame's header after the
			// interrupt first looked.
			assert.Less(t, time.Since(t0), 2*interruptWait+time.Second)
			assert.Regexp(t, `^interrupted the get session 'g@lab-7-0' was serving for 'web'; the get for 'web' was dropped: 'web' took none of its data for [0-9.]+s \(stopped, or in code that holds the interpreter\?\)$`, msg)
			assert.Empty(t, busyWith(target), "the target is free")
		})
	}
}

// A caller that takes a group's part slowly is not dropped by an
// interrupt of the session serving it; a second interrupt meanwhile sends
// no second cancel, and says which one waits, and behind what.
func TestInterruptOfAServeKeepsASlowCaller(t *testing.T) {
	target, sv, g := partServing(t, true, true)
	g.let.Store(0)
	g.trickle(t, 128<<10) // 1.3 MB/s: the chunk takes 6 s
	onReader(t, target, &proto.Chunk{Sid: sv.Sid, Seq: 0, Data: proto.GetChunk(proto.ChunkSize)}, &proto.Served{Sid: sv.Sid, Error: "KeyboardInterrupt"})
	first, msg := twoInterrupts(t, target)
	assert.Regexp(t, `^sent no second interrupt to session 'g@lab-7-0': the one sent [0-9.]+s ago to stop the get it serves for 'web' still waits for its answer \(behind the get for 'web'\): `, msg)
	select {
	case msg := <-first:
		assert.Equal(t, "interrupted the get session 'g@lab-7-0' was serving for 'web'", msg, "nothing dropped")
	case <-time.After(6 * interruptWait):
		t.Fatal("the first interrupt never answered")
	}
}

// An interrupt of a target whose stdin a stalled relay holds, as the
// stall's message advises, answers within interruptWait and says what
// to do, rather than wait with it; a query ends when its client leaves.
func TestInterruptOfAStalledTargetAnswers(t *testing.T) {
	shortStall(t, 300*time.Millisecond)
	h, from, replies, targets := relayHub(t, "t%d", 1)
	stuck := h.sessions[targets[0]]
	frames, g := gatedWorker(t, stuck)
	g.let.Store(1 << 30) // the serve frame goes through
	go h.serveRequest(from, &proto.Req{ID: 5, Kind: "put", Target: stuck.name, Names: []string{"x"}, Bufs: []int64{proto.ChunkSize}})
	var sv proto.Serve
	require.NoError(t, json.Unmarshal(nextFrame(t, frames).line, &sv))
	g.let.Store(0) // the worker stops reading
	stuck.onServed(&proto.Served{Sid: sv.Sid, OK: true, First: true})
	require.True(t, (<-replies).First)
	from.onChunk(&proto.Chunk{ID: 5, Data: proto.GetChunk(proto.ChunkSize)})
	require.Contains(t, (<-replies).Error, "took none of the put's data")

	type answer struct {
		msg string
		err error
	}
	got := make(chan answer, 1)
	go func() {
		msg, err := stuck.interrupt(wire.Advice{}, false, 0)
		got <- answer{msg, err}
	}()
	select {
	case a := <-got:
		require.NoError(t, a.err)
		assert.Regexp(t, `^asked session 't0' to stop the put it serves for 'web', but it has not stopped within 2(\.[0-9])?s \(stopped, or in code that holds the interpreter\): `, a.msg)
	case <-time.After(interruptWait + 5*time.Second):
		t.Fatal("the interrupt waits with the stalled relay")
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	queried := make(chan struct{})
	go func() {
		stuck.query(ctx, &proto.Query{Kind: wire.OpVars}, 0, wire.Advice{})
		close(queried)
	}()
	select {
	case <-queried:
	case <-time.After(5 * time.Second):
		t.Fatal("the query waits with the stalled relay")
	}
}

// relayedReply is the next reply relayHub's caller gets, within 10 s.
func relayedReply(t *testing.T, replies chan *proto.Reply) *proto.Reply {
	t.Helper()
	select {
	case r := <-replies:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no reply came")
		return nil
	}
}

// A target that takes its data slowly but steadily (a remote link) holds
// the caller's reader up as a stopped one does, for a chunk at a time,
// but is never dropped: an interrupt watches it instead.
func TestInterruptKeepsASlowRelay(t *testing.T) {
	for _, c := range []struct {
		name      string
		newWriter func(io.Writer) *proto.Writer
		per100ms  int64
		rounds    int
	}{
		{"pipe", proto.NewWriter, 256 << 10, 1}, // 2.6 MB/s: a chunk takes 3 s
		// 40 KiB/s, a slow remote link: its writer's pieces show it
		// moving in every round. (With a pipe's 128 KiB pieces, one
		// round in 3 would show no move at least.)
		{"link", proto.NewLinkWriter, 4 << 10, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			shortStall(t, time.Hour)
			h, from, replies, targets := relayHub(t, "t%d", 1)
			slow := h.sessions[targets[0]]
			frames, g := gatedWorkerAs(t, slow, c.newWriter)
			putToStopped(t, h, from, slow, frames, g, replies)
			g.trickle(t, c.per100ms)
			read := onReader(t, from, &proto.Chunk{ID: 5, Seq: 0, Data: proto.GetChunk(proto.ChunkSize)})
			probe := probeLink(from.relaying.Load())
			for i := range c.rounds {
				time.Sleep(interruptWait)
				d, watch := from.dropStalled(from.relaying.Load(), &probe)
				assert.Empty(t, d, "round %d: a target that takes its data is not dropped", i)
				assert.True(t, watch, "round %d: it is watched", i)
			}
			close(g.open) // the rest at once
			select {
			case <-read:
			case <-time.After(10 * time.Second):
				t.Fatal("the slow chunk never went")
			}
			assert.NoError(t, from.linkOf(5).op.err(), "the put goes on")
		})
	}
}

// An interrupt whose answer comes behind a chunk relayed to a stopped
// session drops that put and answers with both.
func TestInterruptAnswersBehindAStoppedPeer(t *testing.T) {
	from, _ := cellPutting(t)
	// The chunk, then the interrupt's answer behind it.
	onReader(t, from, &proto.Chunk{ID: 5, Seq: 0, Data: proto.GetChunk(proto.ChunkSize)}, &proto.Interrupted{Cell: 1, How: proto.HowDelivered})
	t0 := time.Now()
	msg, err := from.interrupt(wire.Advice{}, false, 0)
	require.NoError(t, err)
	assert.Less(t, time.Since(t0), 2*interruptWait+time.Second)
	assert.Regexp(t, `^interrupted cell 1 of session 'web' \(KeyboardInterrupt raised in it\); the put to 't0' was dropped: 't0' took none of its data for [0-9.]+s \(stopped, or in code that holds the interpreter\?\); `, msg)
}

// A second interrupt while the first still waits for its answer (behind
// a transfer to a slow target) sends none, and says which one waits and
// what holds it; the first then answers as the worker does.
func TestSecondInterruptNamesTheOneUnderWay(t *testing.T) {
	from, g := cellPutting(t)
	g.trickle(t, 128<<10) // 1.3 MB/s: the chunk takes 6 s
	onReader(t, from, &proto.Chunk{ID: 5, Seq: 0, Data: proto.GetChunk(proto.ChunkSize)}, &proto.Interrupted{Cell: 1, How: proto.HowDelivered})
	first, msg := twoInterrupts(t, from)
	assert.Regexp(t, `^sent no second interrupt to session 'web': the one sent [0-9.]+s ago to cell 1 still waits for its answer \(behind the put to 't0'\): `, msg)
	select {
	case msg := <-first:
		assert.Regexp(t, `^interrupted cell 1 of session 'web' \(KeyboardInterrupt raised in it\); `, msg)
	case <-time.After(4 * interruptWait):
		t.Fatal("the first interrupt never answered")
	}
	assert.Nil(t, from.interrupting.Load(), "no interrupt under way once it answered")
}

// twoInterrupts interrupts s, and again once the first waits for its
// answer: it returns the first's answer to come, and the second's.
func twoInterrupts(t *testing.T, s *Session) (first <-chan string, second string) {
	t.Helper()
	answer := make(chan string, 1)
	go func() {
		msg, err := s.interrupt(wire.Advice{}, false, 0)
		assert.NoError(t, err)
		answer <- msg
	}()
	require.Eventually(t, func() bool { return s.interrupting.Load() != nil }, 5*time.Second, time.Millisecond)
	second, err := s.interrupt(wire.Advice{}, false, 0)
	require.NoError(t, err)
	return answer, second
}

// A cell's exec frame that its worker does not read (stopped, its stdin
// full) holds the interrupt's lock: an interrupt then says so in time
// instead of waiting for ever.
func TestInterruptBehindAnUnreadCell(t *testing.T) {
	h := reachHub(t, map[string]string{"web": "lab-7"})
	s := h.sessions["web"]
	pr, pw := io.Pipe() // nobody reads pr
	s.w = proto.NewWriter(pw)
	r := &run{cell: 1, fence: newFence(), start: time.Now(), finished: make(chan struct{}), queued: true}
	s.mu.Lock()
	s.cur = r
	s.mu.Unlock()
	sent := make(chan struct{})
	go func() { defer close(sent); s.sendCell(r, "1 + 1") }()
	// The pipe closed, sendCell writes the cell's transcript: before the
	// test's folders go, which that would fill again.
	t.Cleanup(func() {
		pr.Close()
		select {
		case <-sent:
		case <-time.After(10 * time.Second):
			t.Error("sendCell did not return once its pipe closed")
		}
	})
	require.Eventually(t, func() bool { return len(s.imu) == 1 }, 5*time.Second, time.Millisecond)

	answered := make(chan string, 1)
	go func() {
		// A client's cancel (Ctrl-C): the cell is marked cancelled though
		// no interrupt can go.
		msg, err := s.interrupt(wire.Advice{}, true, 0)
		assert.NoError(t, err)
		answered <- msg
	}()
	select {
	case msg := <-answered:
		assert.Contains(t, msg, "sent no interrupt: session 'web' has not read its input for 2s")
	case <-time.After(interruptWait + 5*time.Second):
		t.Fatal("the interrupt waits on the unread cell")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	assert.True(t, r.cancelled, "the cancelled exec takes no result")
}

// Frames sent aside to a worker that reads nothing hold at most maxAsides
// goroutines; past them an interrupt fails at once and says why.
func TestAsidesAreBounded(t *testing.T) {
	h := reachHub(t, map[string]string{"web": "lab-7"})
	s := h.sessions["web"]
	pr, pw := io.Pipe() // nobody reads pr
	t.Cleanup(func() { pr.Close() })
	s.w = proto.NewWriter(pw)
	mark := goroutineMark()
	for i := range maxAsides {
		s.sendAside(&proto.Interrupt{Cell: i + 1})
	}
	for i := range 100 {
		select {
		case err := <-s.sendAside(&proto.Interrupt{Cell: maxAsides + i + 1}):
			assert.EqualError(t, err, fmt.Sprintf("session 'web' has not read the last %d frames sent to it (stopped?)", maxAsides))
		case <-time.After(5 * time.Second):
			t.Fatal("an aside past the bound waits")
		}
	}
	assert.Equal(t, maxAsides, goroutinesSince(mark, "hub.(*Session).sendAside"), "goroutines held by 108 asides")
	pr.Close()
	require.Eventually(t, func() bool { return s.asides.Load() == 0 }, 5*time.Second, time.Millisecond)
}

// A worker over an ssh link, durable or not, is written in the link's
// finer pieces; a local one in the pipe's.
func TestFrameWriterByProc(t *testing.T) {
	link := proto.NewLinkWriter(io.Discard).Piece()
	pipe := proto.NewWriter(io.Discard).Piece()
	require.Less(t, link, pipe)
	assert.Equal(t, link, frameWriter(&remoteProc{w: &remote.Worker{}}).Piece(), "remote")
	assert.Equal(t, link, frameWriter(&linkProc{}).Piece(), "remote, durable")
	assert.Equal(t, pipe, frameWriter(&localProc{}).Piece(), "local")
	assert.Equal(t, pipe, frameWriter(&socketProc{}).Piece(), "local, adopted")
}

// A cancel that comes right behind its request, before the goroutine
// that serves the request has started, cancels it: the frame reader takes
// both, the request first (takeRequest), which records it as running. It
// was lost: the target served on, and its caller, interrupted, had left.
func TestCancelBeforeItsRequestRuns(t *testing.T) {
	h, from, replies, targets := relayHub(t, "t%d", 1)
	target := h.sessions[targets[0]]
	frames := framesTo(t, target)
	go func() { // a target that ends a serve only when it is cancelled
		for f := range frames {
			if f.op == "cancel" {
				var c proto.Cancel
				if json.Unmarshal(f.line, &c) == nil {
					target.onServed(&proto.Served{Sid: c.Sid, Error: "cancelled"})
				}
			}
		}
	}()
	const n = 50
	for id := int64(1); id <= n; id++ {
		from.takeRequest(&proto.Req{ID: id, Kind: "get", Target: targets[0], Names: []string{"x"}})
		from.takeRequest(&proto.Req{ID: id, Kind: "cancel"})
		select {
		case r := <-replies:
			assert.Equal(t, id, r.ID)
			assert.Contains(t, r.Error, "cancelled", "request %d", id)
		case <-time.After(10 * time.Second):
			t.Fatalf("request %d, cancelled right behind it, is not over after 10 s", id)
		}
	}
	assert.Eventually(t, func() bool {
		from.mu.Lock()
		defer from.mu.Unlock()
		return len(from.running) == 0
	}, 10*time.Second, time.Millisecond, "nothing is kept for requests that ended")
}
