package hub

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/proto"
	"github.com/replhub/replhub/wire"
)

// A cell is written to the transcript after its exec frame went; when the
// cell killed the worker and its exit was handled first, the cell is still
// written (the death note points to the transcript), and the file is not
// left open.
func TestTranscriptAfterExit(t *testing.T) {
	p := testPaths(t)
	h := testHub(t, p)
	s := startedSession(h, "x", 4242)
	h.transcribe(s, &run{cell: 1, start: time.Now()}, "x = 1")
	require.NotNil(t, s.transcript, "open while the worker lives")

	// What the worker's waiter does at its exit.
	s.mu.Lock()
	s.transcript.Close()
	s.transcript = nil
	s.transcriptShut = true
	s.mu.Unlock()

	h.transcribe(s, &run{cell: 2, start: time.Now()}, "import os; os._exit(3)")
	h.transcribeNote(s, "died", "exit status 3")
	b, err := os.ReadFile(p.Transcript("x"))
	require.NoError(t, err)
	assert.Contains(t, string(b), "x = 1")
	assert.Contains(t, string(b), "os._exit(3)", "the cell that killed it is there")
	assert.Contains(t, string(b), "# exit status 3")
	assert.Nil(t, s.transcript, "and the file is closed again")
}

// A note's title and body are comments to the last line, whatever line
// breaks another session's names or paths bring.
func TestTranscriptNoteIsAllComment(t *testing.T) {
	p := testPaths(t)
	h := testHub(t, p)
	s := startedSession(h, "x", 4242)
	h.transcribeNote(s, "put from 'y': a\nimport os; os.system('boom')\r\nb\rc", "x\ny")
	b, err := os.ReadFile(p.Transcript("x"))
	require.NoError(t, err)
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		assert.True(t, strings.HasPrefix(line, "#"), "a line of code in the transcript: %q", line)
		assert.NotContains(t, line, "\r")
	}
}

// A note's title and body are bounded: another session's names or a
// call's source (up to a megabyte a request, which a host may send in a
// loop) do not fill the disk.
func TestTranscriptNoteIsBounded(t *testing.T) {
	p := testPaths(t)
	h := testHub(t, p)
	s := startedSession(h, "x", 4242)
	for range 10 {
		h.transcribeNote(s, "put from 'y': "+strings.Repeat("n, ", 300<<10), strings.Repeat("def f():\n    pass\n", 50<<10))
	}
	fi, err := os.Stat(p.Transcript("x"))
	require.NoError(t, err)
	assert.Less(t, fi.Size(), int64(10*(maxNoteTitle+maxNoteBody*5/4+1<<10)), "each line made a comment, as cut")
	b, err := os.ReadFile(p.Transcript("x"))
	require.NoError(t, err)
	assert.True(t, strings.Contains(string(b), "more bytes left out ...]"), "says what was cut")
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line != "" {
			assert.True(t, strings.HasPrefix(line, "#"), "a line of code in the transcript: %.80q", line)
		}
	}
}

// A cell that comes within behindAfter of its session's last is written
// behind: not at once, but within the bound, in order, before any note
// that comes after it; its live record's count with it. A cell after a pause is written at once.
func TestCellsRightAfterOthersAreWrittenBehind(t *testing.T) {
	p := testPaths(t)
	h := testHub(t, p)
	h.behind.after = time.Hour // written behind until a note, or flushBehind
	s := startedSession(h, "x", 4242)
	h.recordLive(s)
	read := func() string {
		b, err := os.ReadFile(p.Transcript("x"))
		require.NoError(t, err)
		return string(b)
	}
	cell := func(n int, at time.Time, code string) {
		s.mu.Lock()
		s.cells = n
		s.mu.Unlock()
		h.transcribe(s, &run{cell: n, start: at}, code)
	}
	t0 := time.Now()
	cell(1, t0, "a = 1")
	assert.Contains(t, read(), "a = 1", "the first cell is written at once")
	assert.Equal(t, 1, readRecord(t, h.livePath("x")).Cells)

	cell(2, t0.Add(100*time.Microsecond), "b = 2")
	assert.NotContains(t, read(), "b = 2", "a cell right after another is written behind")
	h.transcribeNote(s, "put from 'y'", "z")
	got := read()
	require.Contains(t, got, "b = 2", "a note comes after the cells before it")
	assert.Less(t, strings.Index(got, "b = 2"), strings.Index(got, "# ---- put from 'y'"))
	assert.Equal(t, 2, readRecord(t, h.livePath("x")).Cells)

	cell(3, t0.Add(200*time.Microsecond), "c = 3")
	cell(4, t0.Add(300*time.Microsecond), "d = 4")
	assert.NotContains(t, read(), "c = 3")
	assert.Equal(t, 2, readRecord(t, h.livePath("x")).Cells)
	h.flushBehind() // what the timer runs
	got = read()
	assert.Less(t, strings.Index(got, "c = 3"), strings.Index(got, "d = 4"), "in order")
	assert.True(t, strings.HasSuffix(got, "# ---- cell 4 · "+t0.Add(300*time.Microsecond).Format(time.RFC3339)+" · cwd \nd = 4\n"), "%q", got)
	assert.Equal(t, 4, readRecord(t, h.livePath("x")).Cells)

	cell(5, t0.Add(time.Second), "e = 5")
	assert.Contains(t, read(), "e = 5", "a cell after a pause is written at once")

	// Within the bound, with nothing else to write it.
	h.behind.mu.Lock()
	h.behind.after = 0
	h.behind.mu.Unlock()
	cell(6, t0.Add(time.Second+time.Microsecond), "f = 6")
	assert.Eventually(t, func() bool { return strings.Contains(read(), "f = 6") }, 5*time.Second, behindAfter)
}

// A restart's hand-over stays in a session's live record to the end: a
// cell that came as the hub stopped, after the stop's first flushBehind,
// and was written behind, or a queued cell whose frame went after the
// hand-over, rewrites the record with its count, and the hand-over with
// it, whether at once or from flushBehind (the timer's, or the stop's
// last).
func TestHandoverStaysInTheLiveRecord(t *testing.T) {
	p := testPaths(t)
	h := testHub(t, p)
	h.behind.after = time.Hour // written behind until flushBehind
	s := durableSession(h, "x")
	cell := func(n int, at time.Time, code string) {
		s.mu.Lock()
		s.cells = n
		s.mu.Unlock()
		h.transcribe(s, &run{cell: n, start: at}, code)
	}
	handedOver := func(cells int) {
		t.Helper()
		rec := readRecord(t, h.livePath("x"))
		assert.NotNil(t, rec.Handover, "the record keeps its hand-over")
		assert.Equal(t, cells, rec.Cells)
	}
	t0 := time.Now()
	cell(1, t0, "a = 1")
	h.flushBehind() // the stop's first
	cell(2, t0.Add(100*time.Microsecond), "b = 2")
	assert.Empty(t, h.handOver(), "the session is handed over")
	handedOver(2)
	h.flushBehind() // the timer's
	handedOver(2)

	cell(3, t0.Add(200*time.Microsecond), "c = 3") // written behind
	h.flushBehind()                                // the stop's last
	handedOver(3)
	cell(4, t0.Add(time.Second), "d = 4") // at once
	handedOver(4)
	b, err := os.ReadFile(p.Transcript("x"))
	require.NoError(t, err)
	assert.Regexp(t, `(?s)a = 1\n.*b = 2\n.*c = 3\n.*d = 4\n$`, string(b))
}

// An exec whose frame has not gone yet (a session without a cell pipe,
// whose stdin a stopped worker does not read; a big cell) is the
// session's cell already: a restart hands it over with the queue, for
// the next hub to run unless the worker says it has it.
func TestUnsentExecIsHandedOver(t *testing.T) {
	h, s, r := unsentExec(t, "'unsent'")
	require.Equal(t, 1, r.cell)

	assert.Empty(t, h.handOver(), "the session is handed over")
	rec := readRecord(t, h.livePath("x"))
	require.NotNil(t, rec.Handover)
	if assert.Len(t, rec.Handover.Queue, 1, "the unsent cell is in the hand-over") {
		assert.Equal(t, 1, rec.Handover.Queue[0].Cell)
		assert.Equal(t, "'unsent'", rec.Handover.Queue[0].Code)
		assert.False(t, rec.Handover.Queue[0].At.IsZero())
	}
	<-s.imu
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return r.sent && r.code == ""
	}, 5*time.Second, time.Millisecond, "the frame's try did not end")
}

// An unsent exec that an interrupt parked (it ends without running once
// its frame's turn comes) is not handed over: the next hub would run what
// the interrupt said would not run. Its code goes as it ends.
func TestParkedUnsentExecIsNotHandedOver(t *testing.T) {
	h, s, r := unsentExec(t, "'parked'") // imu held, as by the interrupt that parks the cell
	require.True(t, s.parkUnsent(r))
	assert.Empty(t, h.handOver(), "the session is handed over")
	ho := readRecord(t, h.livePath("x")).Handover
	require.NotNil(t, ho)
	assert.Empty(t, ho.Queue, "a parked cell was handed over")
	<-s.imu
	require.Eventually(t, r.isFinished, 5*time.Second, time.Millisecond, "the parked cell did not end")
	s.mu.Lock()
	defer s.mu.Unlock()
	assert.Empty(t, r.code, "the parked cell's code is kept")
}

// A started cell whose frame may have gone is handed over with its frame's
// fence, and the next hub sends it with that fence: a worker that reads
// the last hub's frame only after it answered the next hub (it read
// nothing meanwhile) has both with one fence, and runs the cell once. A
// fence that is not one of the hub's (a record on disk) is not taken.
func TestHandedOverCellKeepsItsFence(t *testing.T) {
	h, s, r := unsentExec(t, "'unsent'")
	s.mu.Lock()
	fence := string(r.fence)
	s.mu.Unlock()
	require.True(t, isFence(fence), "%q", fence)
	assert.Empty(t, h.handOver(), "the session is handed over")
	<-s.imu
	ho := readRecord(t, h.livePath("x")).Handover
	require.NotNil(t, ho)
	require.Len(t, ho.Queue, 1)
	assert.Equal(t, fence, ho.Queue[0].Fence, "the hand-over carries the frame's fence")
	ho.Queue = append(ho.Queue, queuedCode{Cell: 2, Code: "'forged'", At: time.Now(), Fence: "\x1e\x1freplhub-fence-zz\x1f\x1e"})

	next := durableSession(testHub(t, testPaths(t)), "x")
	next.mu.Lock()
	next.takeQueueOver(ho, 0)
	require.Len(t, next.queue, 2)
	assert.Nil(t, next.queue[1].fence, "a forged fence is taken")
	next.nextLocked()
	started := next.cur
	next.mu.Unlock()
	require.NotNil(t, started)
	assert.Equal(t, 1, started.cell)
	assert.Equal(t, fence, string(started.fence), "the next hub sends the cell with its fence")
	require.Eventually(t, func() bool {
		next.mu.Lock()
		defer next.mu.Unlock()
		return started.sent
	}, 5*time.Second, time.Millisecond, "the frame's try did not end")
}

// unsentExec runs code as an exec, without waiting, in a durable session
// of a hub of its own whose interrupt lock it holds, as an interrupt
// would: the cell's frame waits for the lock (the caller lets it go).
func unsentExec(t *testing.T, code string) (*Hub, *Session, *run) {
	t.Helper()
	h := testHub(t, testPaths(t))
	s := durableSession(h, "x")
	s.imu <- struct{}{}
	res, err := s.exec(context.Background(), code, time.Second, true, 0, nil, wire.Advice{})
	require.NoError(t, err)
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Equal(t, s.cur.cell, res.Cell, "the reply's cell")
	return h, s, s.cur
}

// durableSession is a live session of h's, recorded, that a restart
// hands over; it reads nothing, so no detach is sent.
func durableSession(h *Hub, name string) *Session {
	s := startedSession(h, name, 4242)
	s.sock = "/nonexistent/worker.sock"
	close(s.ready)
	s.w = proto.NewWriter(brokenWriter{})
	h.mu.Lock()
	h.sessions[name] = s
	h.mu.Unlock()
	h.recordLive(s)
	return s
}

type brokenWriter struct{}

func (brokenWriter) Write([]byte) (int, error) { return 0, io.ErrClosedPipe }
