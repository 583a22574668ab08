package hub

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/proto"
)

// sentFrame is a frame the hub sent a session's worker: its header line,
// op and payload.
type sentFrame struct {
	op         string
	line, data []byte
}

// framesTo stands in for s's worker's input: it returns the frames the
// hub sends s, one at a time, in order.
func framesTo(t *testing.T, s *Session) <-chan sentFrame {
	t.Helper()
	return framesThrough(t, s, func(r io.Reader) io.Reader { return r })
}

// framesThrough is framesTo with the worker's input read through wrap.
func framesThrough(t *testing.T, s *Session, wrap func(io.Reader) io.Reader) <-chan sentFrame {
	t.Helper()
	return framesThroughAs(t, s, proto.NewWriter, wrap)
}

// framesThroughAs is framesThrough with s's writer made by newWriter
// (proto.NewLinkWriter for a worker over a link).
func framesThroughAs(t *testing.T, s *Session, newWriter func(io.Writer) *proto.Writer, wrap func(io.Reader) io.Reader) <-chan sentFrame {
	t.Helper()
	pr, pw := io.Pipe()
	s.w = newWriter(pw)
	t.Cleanup(func() { pw.Close() })
	frames := make(chan sentFrame)
	go func() {
		defer close(frames)
		br := bufio.NewReader(wrap(pr))
		for {
			line, err := br.ReadBytes('\n')
			if err != nil {
				return
			}
			var head proto.Head
			if json.Unmarshal(line, &head) != nil {
				pr.CloseWithError(fmt.Errorf("bad frame %q", line))
				return
			}
			data := make([]byte, head.Len)
			if _, err := io.ReadFull(br, data); err != nil {
				return
			}
			frames <- sentFrame{head.O, line, data}
		}
	}()
	return frames
}

// fakeWorker stands in for s's worker: it reads the frames the hub sends
// it, answers a serve with answer's served frame (none when answer returns
// nil), and passes on every reply to replies, when set.
func fakeWorker(t *testing.T, s *Session, answer func(*proto.Serve) *proto.Served, replies chan<- *proto.Reply) {
	t.Helper()
	frames := framesTo(t, s)
	go func() {
		for f := range frames {
			switch f.op {
			case "serve":
				var sv proto.Serve
				if json.Unmarshal(f.line, &sv) == nil && answer != nil {
					if served := answer(&sv); served != nil {
						s.onServed(served)
					}
				}
			case "reply":
				r := &proto.Reply{Data: f.data}
				if json.Unmarshal(f.line, r) == nil && replies != nil {
					replies <- r
				}
			}
		}
	}()
}

// serveRequest serves f as takeRequest does, on the calling goroutine.
func (h *Hub) serveRequest(from *Session, f *proto.Req) {
	ctx, stop, err := from.runningAs(f.ID)
	if err != nil {
		from.send(&proto.Reply{ID: f.ID, Error: err.Error()})
		return
	}
	defer stop()
	h.serve(ctx, from, f)
}

// relayHub is a hub with session "web" on lab-7, whose worker passes its
// replies to the returned channel, and n sessions named by format on
// lab-7 too, whose workers are left to the caller.
func relayHub(t *testing.T, format string, n int) (h *Hub, from *Session, replies chan *proto.Reply, targets []string) {
	t.Helper()
	hosts := map[string]string{"web": "lab-7"}
	for i := range n {
		targets = append(targets, fmt.Sprintf(format, i))
		hosts[targets[i]] = "lab-7"
	}
	h = reachHub(t, hosts)
	from = h.sessions["web"]
	replies = make(chan *proto.Reply, n+2)
	fakeWorker(t, from, nil, replies)
	return h, from, replies, targets
}

func TestFanOpenGroups(t *testing.T) {
	h := reachHub(t, map[string]string{
		"loc": "local", "web": "lab-7", "peer": "lab-7",
		"mine@lab-7": "lab-7", "deploy@lab-7": "lab-7", "theirs@lab-7": "lab-7",
	})
	open := func(from, name string, hosts ...string) *proto.Reply {
		reply := &proto.Reply{}
		h.fanOpen(h.sessions[from], &proto.Req{Kind: "open", Name: name, Hosts: hosts}, reply)
		return reply
	}
	recorded := func(name string) (groupRecord, bool) {
		h.mu.Lock()
		defer h.mu.Unlock()
		g, ok := h.groups[name]
		return g, ok
	}

	t.Run("every host refused", func(t *testing.T) {
		reply := open("web", "pwn", "db-prod")
		require.Len(t, reply.Fan, 1)
		assert.Contains(t, reply.Fan[0].Error, "may not reach 'pwn@db-prod' (on db-prod)")
		_, ok := recorded("pwn")
		assert.False(t, ok, "a refused request defines no group")
		assert.Nil(t, h.groupOf("pwn"))
	})
	t.Run("one host refused", func(t *testing.T) {
		reply := open("web", "deploy", "lab-7", "db-prod")
		require.Len(t, reply.Fan, 2)
		assert.True(t, reply.Fan[0].OK || reply.Fan[1].OK, "the host it reaches opens")
		_, ok := recorded("deploy")
		assert.False(t, ok)
		assert.Equal(t, []string{"lab-7"}, h.groupOf("deploy"), "the group is what its sessions are")
	})
	t.Run("the user's group stays", func(t *testing.T) {
		h.mu.Lock()
		h.groups["deploy"] = groupRecord{hosts: []string{"db-prod"}}
		h.mu.Unlock()
		reply := open("web", "deploy", "lab-7")
		require.Len(t, reply.Fan, 1)
		assert.True(t, reply.Fan[0].OK, reply.Fan[0].Error)
		assert.Equal(t, []string{"db-prod"}, h.groupOf("deploy"))
	})
	t.Run("a session defines its own", func(t *testing.T) {
		assert.Empty(t, open("web", "mine", "lab-7").Error)
		g, ok := recorded("mine")
		require.True(t, ok)
		assert.Equal(t, groupRecord{hosts: []string{"lab-7"}, by: "web"}, g)
		assert.Empty(t, open("web", "mine", "lab-7").Error, "and defines it anew")
	})
	t.Run("another session's group stays", func(t *testing.T) {
		open("peer", "mine", "lab-7")
		g, _ := recorded("mine")
		assert.Equal(t, "web", g.by)
	})
	t.Run("found from sessions elsewhere", func(t *testing.T) {
		h.mu.Lock()
		s := newSession(h, "theirs@lab-8")
		s.info.Host = "lab-8"
		close(s.ready)
		h.sessions[s.name] = s
		h.mu.Unlock()
		open("web", "theirs", "lab-7")
		_, ok := recorded("theirs")
		assert.False(t, ok, "a request may not narrow a group it did not make")
		assert.Equal(t, []string{"lab-7", "lab-8"}, h.groupOf("theirs"))
	})
	t.Run("found from swaps", func(t *testing.T) {
		require.NoError(t, os.MkdirAll(h.paths.SwapDir(), 0o700))
		for _, f := range []string{"theirs@lab-9.json", "theirs@lab-9.pickle", "theirs@lab-6.pickle", "theirs@.json", "other@lab-5.json"} {
			require.NoError(t, os.WriteFile(filepath.Join(h.paths.SwapDir(), f), nil, 0o600))
		}
		assert.Equal(t, []string{"lab-7", "lab-8", "lab-9"}, h.groupOf("theirs"),
			"a swap's record names a member, whatever it holds; a pickle alone does not")
	})
	t.Run("at most maxGroups", func(t *testing.T) {
		h.mu.Lock()
		delete(h.groups, "mine")
		for i := range maxGroups {
			h.groups[fmt.Sprintf("g%d", i)] = groupRecord{hosts: []string{"lab-7"}, by: "peer"}
		}
		h.mu.Unlock()
		reply := open("web", "mine", "lab-7")
		assert.Equal(t, fmt.Sprintf("hub: it remembers at most %d groups; kill a group no longer needed first", maxGroups), reply.Error)
		assert.NotContains(t, reply.Error, "\n")
		h.mu.Lock()
		defer h.mu.Unlock()
		assert.NoError(t, h.rememberGroupLocked("users", []string{"db-prod"}, ""), "sessions do not use up the user's groups")
	})
}

func TestFanServeReplyBound(t *testing.T) {
	h, from, replies, targets := relayHub(t, "g@lab-7-%d", 4)
	from.frames = proto.NewReader(strings.NewReader(""))
	from.frames.MaxBlob = 250
	for _, name := range targets {
		fakeWorker(t, h.sessions[name], func(f *proto.Serve) *proto.Served {
			return &proto.Served{Sid: f.Sid, OK: true, Py: "3.12", Data: make([]byte, 100)}
		}, nil)
	}
	h.serveRequest(from, &proto.Req{ID: 1, Kind: "get", Names: []string{"x"}, Targets: targets})
	reply := <-replies
	require.True(t, reply.OK, reply.Error)
	var ok, tooLarge int
	var total int64
	for _, item := range reply.Fan {
		if item.OK {
			ok++
			total += item.Len
			continue
		}
		assert.Contains(t, item.Error, "is too large for the group's reply")
		assert.Zero(t, item.Len)
		tooLarge++
	}
	assert.Equal(t, 2, ok, "two values of 100 bytes fit in 250")
	assert.Equal(t, 2, tooLarge)
	assert.Equal(t, total, int64(len(reply.Data)))
}

func TestRequestsInFlight(t *testing.T) {
	h, from, replies, _ := relayHub(t, "t%d", maxRequests)
	for i := range maxRequests {
		target := h.sessions[fmt.Sprintf("t%d", i)]
		fakeWorker(t, target, nil, nil) // it never answers, until told below
		from.takeRequest(&proto.Req{ID: int64(i + 1), Kind: "get", Target: target.name, Names: []string{"x"}})
	}
	serving := func(s *Session) *serveOp {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.serving
	}
	for i := range maxRequests {
		target := h.sessions[fmt.Sprintf("t%d", i)]
		require.Eventually(t, func() bool { return serving(target) != nil }, 5*time.Second, time.Millisecond)
	}

	from.takeRequest(&proto.Req{ID: 100, Kind: "sessions"})
	reply := <-replies
	assert.Equal(t, int64(100), reply.ID)
	assert.False(t, reply.OK)
	assert.Equal(t, fmt.Sprintf("too many requests at once: session 'web' has %d waiting on the hub; wait for one to end", maxRequests), reply.Error)

	for i := range maxRequests {
		target := h.sessions[fmt.Sprintf("t%d", i)]
		target.onServed(&proto.Served{Sid: serving(target).sid, OK: true})
	}
	for range maxRequests {
		r := <-replies
		assert.True(t, r.OK, r.Error)
	}
	require.Eventually(t, func() bool { return from.requests.Load() == 0 }, 5*time.Second, time.Millisecond)
	from.takeRequest(&proto.Req{ID: 101, Kind: "sessions"})
	reply = <-replies
	assert.True(t, reply.OK, "a slot is free again: %s", reply.Error)
}

// A group's streamed request: each part's last word comes under the
// part's own id, before the group's reply; at most fanStreams parts are
// served at once, the next taking the turn one frees; a cancel ends the
// parts still waiting for a turn.
func TestFanServeStreamed(t *testing.T) {
	n := fanStreams + 2
	h, from, replies, targets := relayHub(t, "g@lab-7-%d", n)
	type serving struct {
		s *Session
		f *proto.Serve
	}
	served := make(chan serving, n)
	for _, name := range targets {
		s := h.sessions[name]
		fakeWorker(t, s, func(f *proto.Serve) *proto.Served {
			served <- serving{s, f}
			return nil // answered below
		}, nil)
	}
	go h.serveRequest(from, &proto.Req{ID: 7, Kind: "get", Names: []string{"x"}, Oob: true, Targets: targets})

	var busy []serving
	for range fanStreams {
		busy = append(busy, <-served)
	}
	select {
	case x := <-served:
		t.Fatalf("a part past fanStreams was served: %s", x.s.name)
	case <-time.After(200 * time.Millisecond):
	}
	one := busy[0]
	one.s.onServed(&proto.Served{Sid: one.f.Sid, OK: true, Py: "3.12", Data: []byte("v")})
	last := <-replies
	id, part := fanLinkOf(last.ID)
	assert.True(t, part && id == 7, "a part's last word, under its own id: %d", last.ID)
	assert.True(t, last.OK)
	assert.False(t, last.First)
	busy = append(busy[1:], <-served) // the freed turn is taken

	from.takeRequest(&proto.Req{ID: 7, Kind: "cancel"})
	cancelled := <-replies
	assert.Contains(t, cancelled.Error, "the get was cancelled before it reached 'g@lab-7-")
	for _, x := range busy {
		x.s.onServed(&proto.Served{Sid: x.f.Sid, Error: "KeyboardInterrupt"})
	}
	for range busy {
		r := <-replies
		_, part := fanLinkOf(r.ID)
		assert.True(t, part, "each part's last word before the group's reply")
		assert.Equal(t, "KeyboardInterrupt", r.Error)
	}
	group := <-replies
	require.Equal(t, int64(7), group.ID)
	require.Len(t, group.Fan, n)
	oks := 0
	for _, item := range group.Fan {
		if item.OK {
			oks++
		}
	}
	assert.Equal(t, 1, oks)
	assert.Equal(t, []byte("v"), group.Data)
}

// A request's id is what its group's parts' links are made of: one that
// would make a part's link meet a request's own id (not positive, or past
// maxRequestID, where id<<12 overflows) is refused before it is served.
func TestRequestIDs(t *testing.T) {
	h, from, replies, targets := relayHub(t, "g@lab-7-%d", 1)
	fakeWorker(t, h.sessions[targets[0]], nil, nil)
	for _, id := range []int64{0, -1, -4096, maxRequestID + 1, 1 << 51, 1<<63 - 1} {
		from.takeRequest(&proto.Req{ID: id, Kind: "put", Bufs: []int64{1 << 20}, Targets: targets})
		select {
		case reply := <-replies:
			assert.Equal(t, id, reply.ID)
			assert.Contains(t, reply.Error, "bad request id")
		case <-time.After(5 * time.Second):
			t.Fatalf("request %d was not refused", id)
		}
	}
	for _, id := range []int64{1, maxRequestID} {
		for _, i := range []int{0, maxHosts - 1} {
			link := fanLinkID(id, i)
			back, part := fanLinkOf(link)
			assert.True(t, link < 0 && part && back == id, "part %d of %d: link %d", i, id, link)
		}
	}
	assert.Equal(t, int32(0), from.requests.Load(), "a refused request holds no slot")
}

// A put, get or call whose caller died before its link to the target was
// made (so that the death's cancel found nothing to tell) is cancelled
// at the link: the target is told once, and the relay ends.
func TestRelayOfADeadCallerIsCancelledAtTheLink(t *testing.T) {
	h, from, _, targets := relayHub(t, "t%d", 1)
	target := h.sessions[targets[0]]
	frames := framesTo(t, target)
	from.mu.Lock()
	from.state = stateDead
	from.mu.Unlock()

	cancelled, stop, err := from.runningAs(7)
	require.NoError(t, err)
	defer stop()
	require.Error(t, cancelled.Err(), "a dead session's request is cancelled from the start")
	done := make(chan error, 1)
	go func() {
		_, err := h.relayServe(cancelled, from, &proto.Req{ID: 7, Kind: "get", Target: target.name, Names: []string{"x"}})
		done <- err
	}()
	frame := func() sentFrame {
		select {
		case f := <-frames:
			return f
		case <-time.After(10 * time.Second):
			t.Fatal("no frame reached the target")
			return sentFrame{}
		}
	}
	f := frame()
	require.Equal(t, "serve", f.op)
	var serve proto.Serve
	require.NoError(t, json.Unmarshal(f.line, &serve))
	f = frame()
	require.Equal(t, "cancel", f.op, "the target is told at once")
	var c proto.Cancel
	require.NoError(t, json.Unmarshal(f.line, &c))
	assert.Equal(t, serve.Sid, c.Sid)
	sid := serve.Sid
	target.onServed(&proto.Served{Sid: sid, Error: "cancelled"})
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the relay did not end")
	}
}

// A worker that floods requests the hub refuses (bad ids) and reads none
// of the answers holds at most maxRefusals goroutines in the hub; a
// cancel, of anything and with targets or not, is served on the frame
// reader and holds none. The refusals kept reach the worker once it reads.
func TestRefusalsAreBounded(t *testing.T) {
	_, from, replies, _ := relayHub(t, "t%d", 0)
	mark := goroutineMark()
	for i := range 10000 {
		from.takeRequest(&proto.Req{ID: -1 - int64(i), Kind: "sessions"})
		from.takeRequest(&proto.Req{ID: int64(i + 1), Kind: "cancel", Targets: []string{"t0", "nobody"}})
	}
	assert.LessOrEqual(t, goroutinesSince(mark, "hub.(*Session).refuse", "hub.(*Session).takeRequest", "hub.(*Session).cancel"), maxRefusals,
		"goroutines held by the flood")
	// A refusal's goroutine lets go of its count just after its reply
	// came: poll the count while taking the replies.
	got := 0
	deadline := time.Now().Add(10 * time.Second)
	for from.refusals.Load() > 0 || len(replies) > 0 {
		select {
		case r := <-replies:
			assert.Contains(t, r.Error, "bad request id")
			got++
		case <-time.After(10 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatalf("%d refusals still held after %d came", from.refusals.Load(), got)
			}
		}
	}
	assert.Positive(t, got)
	assert.LessOrEqual(t, got, maxRefusals+8, "the refusals kept, and a few on their way when the flood came")
}

// A target's worker that sends chunks under the sid of a serve before it
// was asked (a guessed sid) meets the serve while its sinks are set: the
// chunks are dropped or taken, never raced with (run with -race).
func TestChunksBeforeTheServe(t *testing.T) {
	h, from, replies, targets := relayHub(t, "t%d", 1)
	target := h.sessions[targets[0]]
	served := framesTo(t, target)
	stop := make(chan struct{})
	flooded := make(chan struct{})
	next := sids.Load() + 1
	go func() {
		defer close(flooded)
		for i := 0; i < 1_000_000; i++ {
			select {
			case <-stop:
				return
			default:
			}
			target.onChunk(&proto.Chunk{Sid: next, Seq: int64(i), Data: proto.GetChunk(16)})
			target.onAck(&proto.Ack{Sid: next, Seq: int64(i)})
		}
	}()
	go h.serveRequest(from, &proto.Req{ID: 5, Kind: "put", Target: target.name, Names: []string{"x"}, Bufs: []int64{16}})
	var sv proto.Serve
	require.NoError(t, json.Unmarshal(nextFrame(t, served).line, &sv))
	close(stop)
	<-flooded
	assert.Equal(t, next, sv.Sid, "the sid flooded is the serve's")
	target.onServed(&proto.Served{Sid: sv.Sid, Error: "no"})
	select {
	case r := <-replies:
		assert.Equal(t, int64(5), r.ID)
	case <-time.After(10 * time.Second):
		t.Fatal("no reply")
	}
}
