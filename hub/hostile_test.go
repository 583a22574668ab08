package hub

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/proto"
	"github.com/replhub/replhub/remote"
	"github.com/replhub/replhub/tests/sshtest"
	"github.com/replhub/replhub/wire"
)

// What a worker that misbehaves on purpose can make the hub keep or wait
// for: each must stay bounded, and the session's frames must go on being
// read.

// A worker that sends error frames and malformed lines in a loop, and
// reads nothing the hub sends it: the notes for the next reply stay few
// and short, the last counting what was dropped, and the hub's answers
// to the malformed lines do not stop its frames being read.
func TestWorkerNotesAreBounded(t *testing.T) {
	h := reachHub(t, map[string]string{"loc": "local"})
	s := h.sessions["loc"]
	s.state = stateIdle
	unread, stuck, err := os.Pipe() // nobody reads what the hub sends
	require.NoError(t, err)
	defer unread.Close()
	defer stuck.Close() // ends the writes left waiting on it
	s.w = proto.NewWriter(stuck)
	pr, pw := io.Pipe()
	s.frames = proto.NewReader(pr)
	const errors, junk = 40, 20000
	go func() {
		w := proto.NewWriter(pw)
		big := strings.Repeat("x", 100<<10)
		for range errors {
			w.Write(&proto.Error{Error: big})
		}
		for range junk {
			pw.Write([]byte("not json\n"))
		}
		pw.Close()
	}()
	read := make(chan struct{})
	go func() { s.readFrames(); close(read) }()
	select {
	case <-read:
	case <-time.After(30 * time.Second):
		t.Fatal("the worker's frames stopped being read: the answers to its malformed lines wait on a stream it does not read")
	}
	s.mu.Lock()
	notes := append([]string(nil), s.notes...)
	s.mu.Unlock()
	require.Len(t, notes, maxNotes)
	total := 0
	for _, n := range notes {
		assert.LessOrEqual(t, len(n), maxNoteLen+100)
		total += len(n)
	}
	assert.Less(t, total, maxNotes*(maxNoteLen+100))
	assert.Equal(t, fmt.Sprintf("%d more notes from the worker were dropped (it sent malformed or error frames in a loop)", errors+junk-(maxNotes-1)), notes[maxNotes-1])

	// Once taken, the count starts again.
	s.mu.Lock()
	s.notes = nil
	for range maxNotes + 2 {
		s.workerNoteLocked("again")
	}
	assert.Equal(t, "3 more notes from the worker were dropped (it sent malformed or error frames in a loop)", s.notes[maxNotes-1])
	s.mu.Unlock()
}

// A done frame whose payload is a tiny image and 32 MiB of an item of no
// known type: what is kept of it holds the image's bytes, not the
// payload's array.
func TestDisplayItemsKeepNoneOfThePayload(t *testing.T) {
	png := pngOf(t, 1, 1, false)
	svg := []byte(`<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"/>`)
	data := make([]byte, proto.DisplaySize)
	copy(data, png)
	copy(data[len(png):], svg)
	f := &proto.Done{Display: []proto.DisplayItem{
		{MIME: "image/png", Size: int64(len(png))},
		{MIME: "image/svg+xml", Size: int64(len(svg))},
		{MIME: "x/pad", Size: int64(len(data) - len(png) - len(svg))},
	}, Data: data}
	items, _ := displayItems(f)
	require.Len(t, items, 2)
	for _, d := range items {
		assert.Less(t, cap(d.Data), 1024, "%s keeps an array of %d bytes", d.MIME, cap(d.Data))
	}
}

// Puts of 32 MiB each to sessions whose workers take every frame and
// answer none: once the serve frames are written, the hub keeps none of
// the data while it waits for the answers.
func TestWaitingPutsKeepNoData(t *testing.T) {
	h, from, _, targets := relayHub(t, "t%d", 8)
	for _, name := range targets {
		pr, pw := io.Pipe() // a worker that reads every frame, answers none
		h.sessions[name].w = proto.NewWriter(pw)
		go io.Copy(io.Discard, pr)
		t.Cleanup(func() { pr.Close() })
	}
	heap := func() int64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return int64(m.HeapInuse)
	}
	before := heap()
	for i, name := range targets {
		from.takeRequest(&proto.Req{ID: int64(i + 1), Kind: "put", Target: name, Names: []string{"x"}, Data: make([]byte, 32<<20)})
	}
	written := func() bool {
		for _, name := range targets {
			if h.sessions[name].w.Written() < 32<<20 {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(20 * time.Second)
	for !written() {
		require.True(t, time.Now().Before(deadline), "the serve frames were not written")
		time.Sleep(10 * time.Millisecond)
	}
	require.Equal(t, int32(len(targets)), from.requests.Load(), "every put waits for its answer")
	grew := heap() - before
	assert.Less(t, grew, int64(32<<20), "the hub keeps %d MiB for %d puts that wait for their answers", grew>>20, len(targets))
}

// A worker that reads nothing is swapped (the sweep, `replhub swap`):
// the swap fails once the frame stalls, rather than holding its caller,
// the sweep behind it and the hub's stop; an interrupt of the session
// meanwhile does not wait for the swap past lookupSwapWait.
func TestSwapOfAWorkerThatReadsNothing(t *testing.T) {
	shortStall(t, 300*time.Millisecond)
	shortLookupSwapWait(t, 500*time.Millisecond)
	h := reachHub(t, map[string]string{"loc": "local"})
	s := h.sessions["loc"]
	s.state = stateIdle
	pr, pw := io.Pipe() // takes nothing: a write waits for a reader
	t.Cleanup(func() { pr.Close() })
	s.w = proto.NewWriter(pw)
	swapped := make(chan wire.SwapOutcome, 1)
	go func() { swapped <- h.swapOut(context.Background(), s, false, "test", 0) }()
	time.Sleep(100 * time.Millisecond)
	looked := make(chan error, 1)
	go func() {
		_, err := h.Interrupt(wire.Request{Name: "loc"})
		looked <- err
	}()
	select {
	case o := <-swapped:
		assert.Equal(t, wire.SwapFailed, o.Status, "%+v", o)
	case <-time.After(10 * time.Second):
		t.Fatal("the swap of a worker that reads nothing has not returned after 10 s")
	}
	select {
	case <-looked:
	case <-time.After(10 * time.Second):
		t.Fatal("an interrupt of the session waits for its swap")
	}
	assert.Equal(t, "", busyWith(s), "the failed swap leaves the session")
}

// A restart's detach of a worker that reads nothing gives up after the
// stall, and the restart goes on.
func TestDetachOfAWorkerThatReadsNothing(t *testing.T) {
	shortStall(t, 300*time.Millisecond)
	h := reachHub(t, map[string]string{"loc": "local"})
	s := h.sessions["loc"]
	s.state = stateIdle
	s.sock = "/nonexistent/worker.sock"
	pr, pw := io.Pipe()
	t.Cleanup(func() { pr.Close() })
	s.w = proto.NewWriter(pw)
	done := make(chan struct{})
	go func() { s.detach(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the detach of a worker that reads nothing has not returned after 10 s")
	}
}

// An interrupt of a session that is still starting answers at once
// (lookup would wait for the start, up to its bound), saying so, and
// keeps the interrupt for the session's first cell (TestCtrlCDuringTheStart
// shows that cell end without running).
func TestInterruptWhileStarting(t *testing.T) {
	h := reachHub(t, nil)
	h.startTimeout = 30 * time.Second
	s := newSession(h, "slow") // its ready channel still open: starting
	h.sessions["slow"] = s
	done := make(chan string, 1)
	go func() {
		msg, err := h.Interrupt(wire.Request{Name: "slow"})
		assert.NoError(t, err)
		done <- msg
	}()
	select {
	case msg := <-done:
		assert.Equal(t, "session 'slow' is still starting (its start may take up to 30s): its first cell will end as interrupted, without running, once the session is up", msg)
		s.mu.Lock()
		assert.True(t, s.startInterrupted)
		s.mu.Unlock()
	case <-time.After(5 * time.Second):
		t.Fatal("an interrupt waits for the session's start")
	}
}

// An exec of more code than a pipe holds, to a worker that reads
// nothing: the call returns at its timeout, the cell running (its frame
// goes when the worker reads), rather than waiting in the write.
func TestBigExecToAWorkerThatReadsNothing(t *testing.T) {
	pr, pw, err := os.Pipe() // 64 KiB, and nobody reads it
	require.NoError(t, err)
	// Closed after the hub's folders are removed (cleanups run last
	// first): the write it ends would have the hub record the session's
	// end in them as they go.
	t.Cleanup(func() { pr.Close(); pw.Close() })
	h := reachHub(t, map[string]string{"loc": "local"})
	s := h.sessions["loc"]
	s.state = stateIdle
	s.w = proto.NewWriter(pw)
	answersRunning(t, h, wire.Request{Name: "loc", Code: strings.Repeat("1\n", 50000), Timeout: 0.5},
		"an exec with a 0.5 s timeout waits in the write of its frame")
}

// answersRunning runs req, an exec, and asks that it answer within 10 s,
// its cell running; else fails t with why.
func answersRunning(t *testing.T, h *Hub, req wire.Request, why string) {
	t.Helper()
	done := make(chan *wire.Result, 1)
	go func() {
		res, err := h.Exec(context.Background(), req, nil)
		assert.NoError(t, err)
		done <- res
	}()
	select {
	case res := <-done:
		require.NotNil(t, res)
		assert.Equal(t, wire.StatusRunning, res.Status)
	case <-time.After(10 * time.Second):
		t.Fatal(why)
	}
}

// The hub's bound on queries in flight is the worker's (QUERIES_MAX).
func TestMaxQueriesIsTheWorkers(t *testing.T) {
	src, err := os.ReadFile("../boot/worker.py")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^QUERIES_MAX = (\d+)`).FindSubmatch(src)
	require.NotNil(t, m, "QUERIES_MAX in worker.py")
	assert.Equal(t, strconv.Itoa(maxQueries), string(m[1]))
}

// Past the queries a worker answers at once, a query is refused before a
// frame goes, in words that say to ask again, not that the worker stopped
// reading (which past sendAside's bound they said).
func TestQueriesPastTheBoundAreRefused(t *testing.T) {
	h := reachHub(t, map[string]string{"loc": "local"})
	s := h.sessions["loc"]
	s.state = stateIdle
	s.w = proto.NewWriter(io.Discard)
	s.queries = map[int64]chan *proto.Answer{}
	for i := range maxQueries {
		s.queries[int64(-1-i)] = make(chan *proto.Answer, 1)
	}
	_, err := s.query(context.Background(), &proto.Query{Kind: wire.OpVars}, 0, wire.Advice{})
	require.Error(t, err)
	assert.True(t, wire.IsCode(err, wire.CodeBusy), "%v", err)
	assert.Equal(t, "session 'loc' is answering 4 queries already: ask again in a moment", err.Error())
}

// A big exec's frame goes on a goroutine: an interrupt that comes before
// it went parks the cell, which then ends as interrupted without running
// (the worker, which never saw it, would answer that no cell runs).
func TestInterruptBeforeABigExecsFrameParksIt(t *testing.T) {
	h := reachHub(t, map[string]string{"loc": "local"})
	s := h.sessions["loc"]
	s.state = stateIdle
	r := &run{cell: 1, fence: newFence(), start: time.Now(), finished: make(chan struct{}), unsent: true}
	s.cur, s.cells, s.state = r, 1, stateRunning
	s.imu <- struct{}{} // as interrupt holds it
	assert.True(t, s.parkUnsent(r), "an unsent big exec's cell is parked")
	<-s.imu
	var out bytes.Buffer
	s.w = proto.NewWriter(&out)
	s.sendCell(r, strings.Repeat("1\n", 50000))
	require.True(t, r.isFinished())
	assert.Equal(t, "KeyboardInterrupt", r.done.Error.Type)
	assert.Zero(t, out.Len(), "no frame went")
}

// A wait that comes during a swap that takes longer than lookup's wait
// (a big namespace, a slow disk) takes nothing: the result nobody had
// read goes into the swap's record, and taken here as well it would come
// again on restore. It waits for the swap's end within its timeout: a
// swap that fails leaves the result to it; one that goes on past the
// timeout is said to be under way.
func TestWaitDuringASwapTakesNothing(t *testing.T) {
	shortLookupSwapWait(t, 50*time.Millisecond)
	h := reachHub(t, map[string]string{"loc": "local"})
	s := h.sessions["loc"]
	s.mu.Lock()
	s.state, s.cells = stateRunning, 1
	s.cur = &run{cell: 1, finished: make(chan struct{}), result: &wire.Result{Session: "loc", Cell: 1, Status: wire.StatusOK, Stdout: "42\n"}}
	close(s.cur.finished)
	op := &serveOp{kind: "swap", ended: make(chan struct{})}
	s.serving = op
	s.mu.Unlock()

	_, err := h.Wait(context.Background(), wire.Request{Name: "loc", Timeout: 0.3}, nil)
	var we *wire.Error
	require.ErrorAs(t, err, &we)
	assert.Equal(t, wire.CodeBusy, we.Code)
	assert.Equal(t, "session 'loc' is being swapped to disk (its unread output goes with it): try `replhub wait loc` again in a moment", we.Message)
	assert.False(t, s.cur.collected, "taken during the swap")

	got := waitAsync(t, h, wire.Request{Name: "loc", Timeout: 10})
	time.Sleep(200 * time.Millisecond)
	select {
	case <-got:
		t.Fatal("a wait took the result during the swap")
	default:
	}
	h.endSwapOp(s, op) // the swap failed: the session stays, its result unread
	gotStdout(t, got, "42\n", "the wait did not go on once the swap ended")

	// A swap that ends while the wait waits for it, and another of the
	// same session under way as the wait looks its name up again; then
	// one under way before the wait's first lookup: each look keeps to
	// the wait's own timeout, not lookup's 10 s.
	lookupSwapWait = 10 * time.Second
	for _, jobFirst := range []bool{false, true} {
		job := &swapJob{done: make(chan struct{})}
		op = &serveOp{kind: "swap", ended: make(chan struct{})}
		s.mu.Lock()
		s.cur = &run{cell: 1, finished: make(chan struct{}), result: &wire.Result{Session: "loc", Cell: 1, Status: wire.StatusOK, Stdout: "43\n"}}
		close(s.cur.finished)
		s.serving = op
		s.mu.Unlock()
		setJob := func(j *swapJob) {
			h.swap.mu.Lock()
			h.swap.jobs = map[*Session]*swapJob{s: j}
			h.swap.mu.Unlock()
		}
		if jobFirst {
			setJob(job)
		}
		go func() {
			time.Sleep(200 * time.Millisecond)
			setJob(job)
			h.endSwapOp(s, op)
		}()
		t0 := time.Now()
		res, err := h.Wait(context.Background(), wire.Request{Name: "loc", Timeout: 1}, nil)
		assert.Less(t, time.Since(t0), 3*time.Second, "the wait kept to its timeout (job first: %v)", jobFirst)
		if assert.NoError(t, err) {
			assert.Equal(t, "43\n", res.Stdout, "the swap's job is under way, but the session is not being swapped")
		}
		close(job.done)
		setJob(nil)
	}
}

// A wait that comes while a session is restored from its swap, past
// lookup's wait, does not answer idle: the restore has not yet put back
// the session's cells (its count, what nobody had read). It waits for the
// restore within its timeout, and past it says the restore is under way.
func TestWaitDuringARestoreSaysSo(t *testing.T) {
	shortLookupSwapWait(t, 50*time.Millisecond)
	h := reachHub(t, map[string]string{"loc": "local"})
	s := h.sessions["loc"]
	op := &serveOp{kind: "restore", ended: make(chan struct{})}
	s.mu.Lock()
	s.state, s.cells, s.serving = stateRunning, 0, op
	s.mu.Unlock()

	_, err := h.Wait(context.Background(), wire.Request{Name: "loc", Timeout: 0.3}, nil)
	var we *wire.Error
	require.ErrorAs(t, err, &we, "a wait during the restore answered")
	assert.Equal(t, wire.CodeBusy, we.Code)
	assert.Equal(t, "session 'loc' is being restored from its swap (what nobody had read comes with the reply of the call that restores it): try `replhub wait loc` again in a moment", we.Message)

	got := waitAsync(t, h, wire.Request{Name: "loc", Timeout: 10})
	time.Sleep(200 * time.Millisecond)
	select {
	case res := <-got:
		t.Fatalf("a wait answered during the restore: %+v", res)
	default:
	}
	s.mu.Lock()
	s.cells = 7 // as the restore puts them back
	s.mu.Unlock()
	h.endSwapOp(s, op)
	select {
	case res := <-got:
		require.NotNil(t, res)
		assert.Equal(t, wire.StatusIdle, res.Status)
		assert.Equal(t, 7, res.Cell, "the wait answered with the restored session's count")
	case <-time.After(5 * time.Second):
		t.Fatal("the wait did not go on once the restore ended")
	}
}

// A restore that fails ends its session (killed on request, or its swap
// did not load) without ending its op: a wait that came during it answers
// once the session is gone, not at its timeout as if the restore went on.
func TestWaitDuringAFailedRestoreEndsWithIt(t *testing.T) {
	shortLookupSwapWait(t, 50*time.Millisecond)
	h, s := hubWithSession(t, "d")
	op := &serveOp{kind: "restore", ended: make(chan struct{})}
	s.mu.Lock()
	s.state, s.serving = stateRunning, op
	s.mu.Unlock()

	type answer struct {
		res *wire.Result
		err error
	}
	got := make(chan answer, 1)
	go func() {
		res, err := h.Wait(context.Background(), wire.Request{Name: "d", Timeout: 20}, nil)
		got <- answer{res, err}
	}()
	time.Sleep(200 * time.Millisecond)
	select {
	case a := <-got:
		t.Fatalf("a wait answered during the restore: %+v %v", a.res, a.err)
	default:
	}
	// As the restore's failure has it: the worker is killed, and its
	// death handled; the restore's op is never ended.
	h.sessionExited(s, Exit{Signal: "SIGKILL"})
	close(s.exited)
	select {
	case a := <-got:
		var we *wire.Error
		require.ErrorAs(t, a.err, &we, "the wait answered %+v", a.res)
		assert.Equal(t, wire.CodeDead, we.Code, "%s", we.Message)
	case <-time.After(5 * time.Second):
		t.Fatal("the wait went on after the session died during its restore")
	}
}

// A timeout past what a Duration holds (a client's own request, 1e300 s)
// is the most a call waits, not a conversion out of range that made the
// wait return at once; none, a negative one or NaN is the default.
func TestHugeTimeoutIsTheMost(t *testing.T) {
	for _, sec := range []float64{0, -1, math.NaN()} {
		assert.Equal(t, DefaultTimeout, timeoutOf(sec), "%g s", sec)
	}
	assert.Equal(t, 1500*time.Millisecond, timeoutOf(1.5))
	for _, sec := range []float64{MaxTimeout.Seconds(), 1e6, 1e10, 1e300, math.Inf(1)} {
		assert.Equal(t, MaxTimeout, timeoutOf(sec), "%g s", sec)
	}

	h := reachHub(t, map[string]string{"loc": "local"})
	s := h.sessions["loc"]
	r := &run{cell: 1, start: time.Now(), finished: make(chan struct{}),
		result: &wire.Result{Session: "loc", Cell: 1, Status: wire.StatusOK, Stdout: "44\n"}}
	s.mu.Lock()
	s.state, s.cells, s.cur = stateRunning, 1, r
	s.mu.Unlock()
	got := waitAsync(t, h, wire.Request{Name: "loc", Timeout: 1e300})
	select {
	case res := <-got:
		t.Fatalf("a wait with a timeout of 1e300 s returned at once: %+v", res)
	case <-time.After(300 * time.Millisecond):
	}
	s.mu.Lock()
	close(r.finished)
	s.mu.Unlock()
	gotStdout(t, got, "44\n", "the wait did not end with its cell")
}

// waitAsync runs h.Wait(req) on a goroutine of its own; its result comes
// on the channel returned.
func waitAsync(t *testing.T, h *Hub, req wire.Request) <-chan *wire.Result {
	got := make(chan *wire.Result, 1)
	go func() {
		res, err := h.Wait(context.Background(), req, nil)
		assert.NoError(t, err)
		got <- res
	}()
	return got
}

// gotStdout takes a result from got within 5 s, and fails with why if
// none comes; its output must be stdout.
func gotStdout(t *testing.T, got <-chan *wire.Result, stdout, why string) {
	t.Helper()
	select {
	case res := <-got:
		require.NotNil(t, res)
		assert.Equal(t, stdout, res.Stdout)
	case <-time.After(5 * time.Second):
		t.Fatal(why)
	}
}

// Objects on their way to targets that read nothing are held up to a
// bound across the hub: a put past it is refused at once, saying why, and
// the bytes count until each serve frame is written, even after its
// request gave up on the stall, and no longer, even while the request
// waits for its answer.
func TestObjectsInFlightAreBounded(t *testing.T) {
	shortStall(t, 300*time.Millisecond)
	old := heldFloor
	heldFloor = 0
	t.Cleanup(func() { heldFloor = old })
	h, from, replies, targets := relayHub(t, "t%d", 4)
	from.mu.Lock()
	from.info.Host = "local" // the hosts' share: TestHostsHoldHalfTheObjectsBound
	from.frames = proto.NewReader(strings.NewReader(""))
	from.frames.MaxBlob = 16 << 20 // the bound: twice that
	from.mu.Unlock()
	drains := make([]func(), len(targets))
	for i, name := range targets {
		pr, pw := io.Pipe() // a worker that reads nothing until drained
		h.sessions[name].w = proto.NewWriter(pw)
		t.Cleanup(func() { pr.Close() })
		drains[i] = func() { go io.Copy(io.Discard, pr) }
	}
	drains[3]() // reads all, answers nothing
	const obj = 12 << 20
	put := func(id int64, target string) {
		from.takeRequest(&proto.Req{ID: id, Kind: "put", Target: target, Names: []string{"x"}, Data: make([]byte, obj)})
	}
	reply := func() *proto.Reply {
		select {
		case r := <-replies:
			return r
		case <-time.After(10 * time.Second):
			t.Fatal("no reply")
			return nil
		}
	}
	put(1, targets[0])
	put(2, targets[1])
	for range 2 {
		assert.NotContains(t, reply().Error, "the hub holds")
	}
	assert.EqualValues(t, 2*obj, h.held.Load(), "the stalled frames' objects still count")

	put(3, targets[2])
	assert.Equal(t, "the hub holds 24 MB of objects on their way to sessions that have not taken them yet (slow, or stopped?), and this put's 12 MB would pass the 32 MB it holds at once: try again once they have gone",
		reply().Error)
	assert.EqualValues(t, 2*obj, h.held.Load())

	drains[0]()
	require.Eventually(t, func() bool { return h.held.Load() == obj }, 10*time.Second, 10*time.Millisecond,
		"a frame written lets its object go")
	put(4, targets[2])
	assert.NotContains(t, reply().Error, "the hub holds", "room again")
	drains[1]()
	drains[2]()
	require.Eventually(t, func() bool { return h.held.Load() == 0 }, 10*time.Second, 10*time.Millisecond)

	// A target that takes the object and puts off its answer: once the
	// frame is written, nothing counts, though the put still waits.
	put(5, targets[3])
	require.Eventually(t, func() bool { return h.sessions[targets[3]].w.Written() >= obj }, 10*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { return h.held.Load() == 0 }, 10*time.Second, 10*time.Millisecond)
	assert.EqualValues(t, 1, from.requests.Load(), "the put waits for its answer")
}

// An exec of a line of code to a worker whose stdin is taken by a frame
// it reads nothing of (a relayed object, the worker stopped), or full of
// whole frames it has not read: the call returns at its timeout, the cell
// running, rather than wait in its write.
func TestSmallExecBehindAStuckFrame(t *testing.T) {
	for _, stuck := range []string{"a frame being written", "whole frames"} {
		h := reachHub(t, map[string]string{"loc": "local"})
		s := h.sessions["loc"]
		s.state = stateIdle
		pr, pw := io.Pipe() // nobody reads it: every write waits
		// The pipe closed, the exec's frame fails and its cell goes to
		// the transcript: before the test's folders go, which that
		// would fill again.
		t.Cleanup(func() {
			pr.Close()
			require.Eventually(t, func() bool {
				s.mu.Lock() // held by the whole write (transcribe)
				defer s.mu.Unlock()
				return s.transcript != nil
			}, 10*time.Second, time.Millisecond, "the cell's transcript after its frame failed")
		})
		w := &startedWriter{w: pw, started: make(chan struct{})}
		s.w = proto.NewWriter(w)
		if stuck == "a frame being written" {
			go s.w.Write(&proto.Serve{Sid: 1, Kind: "put", Data: make([]byte, 1<<20)})
			<-w.started
		}
		answersRunning(t, h, wire.Request{Name: "loc", Code: "1", Timeout: 0.3},
			"an exec with a 0.3 s timeout waits in its write, behind "+stuck)
	}
}

// startedWriter closes started at its first write.
type startedWriter struct {
	w       io.Writer
	once    sync.Once
	started chan struct{}
}

func (w *startedWriter) Write(b []byte) (int, error) {
	w.once.Do(func() { close(w.started) })
	return w.w.Write(b)
}

// A get's answer waits in the hub until its caller reads it, and counts
// toward the same bound: past it the get is refused, saying why; within
// it the answer goes, and counts no longer once written. A group's get
// counts its members' answers together.
func TestAnswersInFlightAreBounded(t *testing.T) {
	old := heldFloor
	heldFloor = 0
	t.Cleanup(func() { heldFloor = old })
	for _, members := range []int{1, 2} {
		h, from, replies, targets := relayHub(t, "g@lab-7-%d", members)
		from.frames = proto.NewReader(strings.NewReader(""))
		from.frames.MaxBlob = 16 << 20 // the bound: twice that
		for _, name := range targets {
			fakeWorker(t, h.sessions[name], func(f *proto.Serve) *proto.Served {
				return &proto.Served{Sid: f.Sid, OK: true, Py: "3.12", Data: make([]byte, 8<<20/members)}
			}, nil)
		}
		get := &proto.Req{ID: 1, Kind: "get", Target: targets[0], Names: []string{"x"}}
		if members > 1 {
			get.Target, get.Targets = "", targets
		}
		h.held.Store(30 << 20) // others' objects
		h.serveRequest(from, get)
		r := <-replies
		assert.False(t, r.OK)
		assert.Zero(t, len(r.Data))
		assert.Zero(t, len(r.Fan))
		assert.Equal(t, "the hub holds 30 MB of objects on their way to sessions that have not taken them yet (slow, or stopped?), and this get's 8 MB would pass the 32 MB it holds at once: try again once they have gone", r.Error)
		assert.EqualValues(t, 30<<20, h.held.Load())

		h.held.Store(0)
		get.ID = 2
		h.serveRequest(from, get)
		r = <-replies
		assert.True(t, r.OK, r.Error)
		assert.Len(t, r.Data, 8<<20)
		require.Eventually(t, func() bool { return h.held.Load() == 0 }, 5*time.Second, time.Millisecond, "written: counted no longer")
	}
}

// An sh's input counts toward the same bound while the command runs (or
// its connection is made): a host whose session asks for many must not
// make the hub hold a blob of up to the object bound for each. A request
// that takes no bytes keeps none it was sent.
func TestShInputsAreBounded(t *testing.T) {
	old := heldFloor
	heldFloor = 0
	t.Cleanup(func() { heldFloor = old })
	h, from, replies, _ := relayHub(t, "t%d", 0)
	h.pool = &remote.Pool{}
	from.mu.Lock()
	from.info.Host = "local" // the hosts' share: TestHostsHoldHalfTheObjectsBound
	from.frames = proto.NewReader(strings.NewReader(""))
	from.frames.MaxBlob = 16 << 20 // the bound: twice that
	from.mu.Unlock()
	// lab-7 is a server that takes connections and says nothing: each
	// sh waits in its ssh handshake until the test lets it go.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var conns []net.Conn
	var connsMu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			connsMu.Lock()
			conns = append(conns, c)
			connsMu.Unlock()
		}
	}()
	letGo := func() {
		ln.Close()
		connsMu.Lock()
		defer connsMu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	}
	t.Cleanup(letGo)
	home := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(home, ".ssh"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(home, ".ssh", "config"), []byte(fmt.Sprintf(
		"Host lab-7\n  HostName 127.0.0.1\n  Port %d\n", ln.Addr().(*net.TCPAddr).Port)), 0o600))
	from.origin = wire.Request{Env: []string{"HOME=" + home, "USER=nobody"}}

	const obj = 12 << 20
	sh := func(id int64) {
		from.takeRequest(&proto.Req{ID: id, Kind: "sh", Host: "lab-7", Argv: []string{"cat"}, Data: make([]byte, obj)})
	}
	sh(1)
	sh(2)
	require.Eventually(t, func() bool {
		connsMu.Lock()
		defer connsMu.Unlock()
		return len(conns) >= 1
	}, 10*time.Second, 10*time.Millisecond, "the first sh dials lab-7")
	assert.EqualValues(t, 2*obj, h.held.Load(), "the inputs of the sh's under way count")
	sh(3)
	select {
	case r := <-replies:
		assert.Equal(t, "the hub holds 24 MB of objects on their way to sessions that have not taken them yet (slow, or stopped?), and this sh's 12 MB would pass the 32 MB it holds at once: try again once they have gone",
			r.Error)
	case <-time.After(10 * time.Second):
		t.Fatal("the sh past the bound was not refused")
	}

	// A request that takes no bytes is sent some: none are kept.
	from.takeRequest(&proto.Req{ID: 4, Kind: "sessions", Data: make([]byte, obj)})
	r := <-replies
	assert.True(t, r.OK, r.Error)
	assert.EqualValues(t, 2*obj, h.held.Load())

	letGo()
	for range 2 {
		select {
		case r := <-replies:
			assert.False(t, r.OK)
		case <-time.After(40 * time.Second):
			t.Fatal("an sh did not end with its connection")
		}
	}
	require.Eventually(t, func() bool { return h.held.Load() == 0 }, 10*time.Second, 10*time.Millisecond)
}

// The sessions of other hosts hold at most half of that bound between
// them: a host whose sessions send objects to sessions of its own that
// read nothing (or never read their answers), or two such hosts, cannot
// take it all, and with it every local session's put, call and get, for
// as long as they live.
func TestHostsHoldHalfTheObjectsBound(t *testing.T) {
	shortStall(t, 300*time.Millisecond)
	old := heldFloor
	heldFloor = 0
	t.Cleanup(func() { heldFloor = old })
	h := reachHub(t, map[string]string{"web": "lab-7", "t0": "lab-7", "t1": "lab-7", "loc": "local", "lt": "local", "w8": "lab-8", "t8": "lab-8"})
	replies := map[string]chan *proto.Reply{}
	for _, name := range []string{"web", "loc", "w8"} {
		s := h.sessions[name]
		s.frames = proto.NewReader(strings.NewReader(""))
		s.frames.MaxBlob = 16 << 20 // the bound: twice that
		replies[name] = make(chan *proto.Reply, 4)
		fakeWorker(t, s, nil, replies[name])
	}
	for _, name := range []string{"t0", "t1", "lt", "t8"} {
		pr, pw := io.Pipe() // a worker that reads nothing
		h.sessions[name].w = proto.NewWriter(pw)
		t.Cleanup(func() { pr.Close() })
	}
	const obj = 12 << 20
	put := func(from, target string, id int64) *proto.Reply {
		h.sessions[from].takeRequest(&proto.Req{ID: id, Kind: "put", Target: target, Names: []string{"x"}, Data: make([]byte, obj)})
		select {
		case r := <-replies[from]:
			return r
		case <-time.After(10 * time.Second):
			t.Fatal("no reply")
			return nil
		}
	}
	assert.NotContains(t, put("web", "t0", 1).Error, "holds")
	assert.Equal(t, "sessions on other hosts hold 12 MB of objects on their way to sessions that have not taken them yet (slow, or stopped?), 12 MB of them on lab-7, and this put's 12 MB would pass the 16 MB the hosts may hold at once (the rest is kept for this machine's sessions): try again once they have gone",
		put("web", "t1", 2).Error)
	// Another host's sessions, as greedy, share the hosts' half.
	assert.Equal(t, "sessions on other hosts hold 12 MB of objects on their way to sessions that have not taken them yet (slow, or stopped?), none of them on lab-8, and this put's 12 MB would pass the 16 MB the hosts may hold at once (the rest is kept for this machine's sessions): try again once they have gone",
		put("w8", "t8", 1).Error)
	assert.EqualValues(t, obj, h.held.Load())
	assert.NotContains(t, put("loc", "lt", 1).Error, "holds", "the rest is there for this machine's")
	assert.EqualValues(t, 2*obj, h.held.Load())
}

// An sh's output waits in the hub until the session that asked reads its
// reply, and counts toward the bound as a get's answer does: a host whose
// session asks for output and never reads it (up to 8 MiB of each stream of a command,
// maxRequests at once, in as many sessions as it opens) holds at most
// its share (holdObject refuses past it).
func TestShOutputsAreBounded(t *testing.T) {
	old := heldFloor
	heldFloor = 0
	t.Cleanup(func() { heldFloor = old })
	home := t.TempDir()
	key := sshtest.NewKey(t, filepath.Join(home, ".ssh", "id_ed25519"), "")
	srv := sshtest.Start(t, sshtest.Options{Authorized: []string{key.Public}})
	u, err := user.Current()
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(home, ".ssh", "config"), []byte(fmt.Sprintf(
		"Host lab-7\n  HostName 127.0.0.1\n  Port %d\n  User %s\n  IdentityFile ~/.ssh/id_ed25519\n", srv.Port, u.Username)), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(home, ".ssh", "known_hosts"), []byte(srv.KnownHostsLine()+"\n"), 0o600))

	h := reachHub(t, map[string]string{"web": "lab-7"})
	h.pool = &remote.Pool{}
	t.Cleanup(h.pool.Close)
	from := h.sessions["web"]
	from.origin = wire.Request{Env: []string{"HOME=" + home, "USER=" + u.Username}}
	from.frames = proto.NewReader(strings.NewReader(""))
	from.frames.MaxBlob = 16 << 20 // the bound: twice that; one host's, 16 MiB
	pr, pw := io.Pipe()            // a worker that reads nothing
	from.w = proto.NewWriter(pw)
	t.Cleanup(func() { pr.Close() })

	const out = 12 << 20
	from.takeRequest(&proto.Req{ID: 1, Kind: "sh", Host: "lab-7", Argv: []string{"head", "-c", strconv.Itoa(out), "/dev/zero"}})
	require.Eventually(t, func() bool { return h.held.Load() >= 8<<20 }, 30*time.Second, 10*time.Millisecond,
		"the output kept (its first and last 4 MiB) waits for web to read it, and counts")
	go io.Copy(io.Discard, pr) // web reads at last
	require.Eventually(t, func() bool { return h.held.Load() == 0 }, 30*time.Second, 10*time.Millisecond)
	assert.Zero(t, from.requests.Load())
}
