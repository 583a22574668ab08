package hub

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/wire"
)

// feedWatcher gives data to a watcher in chunks cut at cuts, then flushes it, and
// returns the texts of its events.
func feedWatcher(w *watcher, data []byte, cuts []byte) []string {
	for _, c := range cuts {
		n := min(int(c)%8, len(data))
		w.outLocked(data[:n])
		data = data[n:]
	}
	w.outLocked(data)
	w.flushLocked()
	close(w.events)
	var texts []string
	for ev := range w.events {
		texts = append(texts, ev.Text)
	}
	return texts
}

// Output cut anywhere reaches a watcher whole, and valid UTF-8 stays valid
// in every event: a character cut by a chunk's end waits for its rest.
func FuzzWatcherOut(f *testing.F) {
	f.Add([]byte("héllo wörld ✓ 🐍\n"), []byte{1, 2, 3})
	f.Add([]byte("\xff\xfe\x00plain"), []byte{1})
	f.Add([]byte("🐍🐍🐍"), []byte{1, 1, 1, 1, 1})
	f.Fuzz(func(t *testing.T, data, cuts []byte) {
		if len(cuts) > 64 {
			cuts = cuts[:64]
		}
		texts := feedWatcher(newWatcher(false), data, cuts)
		assert.Equal(t, string(data), strings.Join(texts, ""))
		if utf8.Valid(data) {
			for _, s := range texts {
				assert.True(t, utf8.ValidString(s), "%q", s)
			}
		}
	})
}

func TestCutRune(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
	}{
		{"", 0}, {"abc", 0}, {"é", 0}, {"\xc3", 1}, {"a\xe2\x9c", 2}, {"\xf0\x9f\x90", 3},
		{"\xf0\x9f\x90\x8d", 0}, {"\x9c", 0}, {"\xff", 0},
	} {
		assert.Equal(t, c.want, cutRune([]byte(c.in)), "%q", c.in)
	}
}

// A watcher that falls behind loses output, and its next event says how
// much; it never blocks the session.
func TestWatcherFallsBehind(t *testing.T) {
	w := newWatcher(false)
	for i := 0; i < watcherQueue; i++ {
		require.True(t, w.outLocked([]byte("x")))
	}
	assert.False(t, w.outLocked([]byte("lost!")))
	<-w.events
	require.True(t, w.outLocked([]byte("next")))
	var last *wire.Event
	for len(w.events) > 0 {
		last = <-w.events
	}
	assert.Equal(t, "\n[... 5 bytes of output not shown here: this console fell behind ...]\nnext", last.Text)
}

// The watcher that runs a cell takes its output from the reply; one that
// only looks leaves it there; the person's cells make one note, once.
func TestTapTakesOwnCellOutput(t *testing.T) {
	s := newSession(&Hub{}, "t")
	own, looker := newWatcher(true), newWatcher(true)
	s.mu.Lock()
	s.watchLocked(looker)
	s.watchLocked(own)
	s.out.write(true, []byte("between cells\n"))
	r := &run{cell: 1, finished: make(chan struct{})}
	s.cur = r
	s.cellStartedLocked(withWatcher(context.Background(), own), r, "print(1)")
	assert.Equal(t, 0, s.out.len(), "the console's cell takes the unread output")
	s.out.write(true, []byte("1\n"))
	assert.Equal(t, 0, s.out.len(), "and its own output")
	s.mu.Unlock()
	assert.Equal(t, "between cells\n", (<-looker.events).Text, "shown as it came")
	ev := <-looker.events
	assert.Equal(t, wire.EventCell, ev.Kind)
	assert.Equal(t, wire.ByAttach, ev.By)
	assert.Equal(t, "print(1)", ev.Code)
	assert.Equal(t, "1\n", (<-looker.events).Text)
	assert.Equal(t, "between cells\n", (<-own.events).Text)
	assert.Equal(t, "1\n", (<-own.events).Text)

	s.mu.Lock()
	r2 := &run{cell: 2, finished: make(chan struct{})}
	s.cur = r2
	s.cellStartedLocked(context.Background(), r2, "print(2)")
	s.out.write(true, []byte("2\n"))
	assert.Equal(t, 2, s.out.len(), "an agent's cell keeps its output")
	s.mu.Unlock()
	assert.Equal(t, "cell 1", strings.TrimPrefix(s.personNote(), "someone worked in this session from `replhub attach`: "))
	assert.Equal(t, "", s.personNote(), "once")
}

// A streaming exec sees its own cell only; a console's events wait, from
// the end of its own cell, for that cell's reply.
func TestWatcherScopes(t *testing.T) {
	s := newSession(&Hub{}, "t")
	stream, console := newWatcher(false), newWatcher(true)
	s.mu.Lock()
	s.watchLocked(console)
	r := &run{cell: 1, finished: make(chan struct{}), result: &wire.Result{Cell: 1}}
	s.cur = r
	s.cellStartedLocked(withWatcher(context.Background(), stream), r, "a")
	s.out.write(true, []byte("mine\n"))
	close(r.finished)
	s.cellFinishedLocked(r)
	r2 := &run{cell: 2, finished: make(chan struct{})}
	s.cur = r2
	s.cellStartedLocked(withWatcher(context.Background(), console), r2, "b")
	s.out.write(true, []byte("console's\n"))
	close(r2.finished)
	r2.result = &wire.Result{Cell: 2}
	s.cellFinishedLocked(r2)
	s.queuedStartedLocked(&run{cell: 3}, "c")
	s.out.write(true, []byte("third\n"))
	s.mu.Unlock()
	stream.close()
	var got []string
	for ev := range stream.events {
		got = append(got, ev.Kind+":"+ev.Text)
	}
	assert.Equal(t, []string{"out:mine\n"}, got, "the streaming exec's own cell, and nothing after it")
	assert.Len(t, console.held, 2, "cell 3's start and output wait for cell 2's reply")
}

// Consoles that only looked are told of a finished cell in one event they
// share, without the output they saw and without images' data; the
// cell's own result is left as it was, for its reply.
func TestCellFinishedOnceForLookers(t *testing.T) {
	s := newSession(&Hub{}, "t")
	a, b := newWatcher(true), newWatcher(true)
	res := &wire.Result{Cell: 1, Status: wire.StatusOK, Output: "1\n", Stdout: "1\n", Notes: []string{"n"},
		Display: []wire.Display{{MIME: "image/png", Data: []byte("iVBOR")}}}
	s.mu.Lock()
	s.watchLocked(a)
	s.watchLocked(b)
	s.cellFinishedLocked(&run{cell: 1, finished: make(chan struct{}), result: res})
	s.mu.Unlock()
	ea, eb := <-a.events, <-b.events
	assert.Same(t, ea, eb, "built once")
	assert.Equal(t, wire.EventDone, ea.Kind)
	assert.Equal(t, wire.StatusOK, ea.Result.Status)
	assert.Empty(t, ea.Result.Output+ea.Result.Stdout)
	assert.Nil(t, ea.Result.Notes)
	require.Len(t, ea.Result.Display, 1)
	assert.Equal(t, "image/png", ea.Result.Display[0].MIME)
	assert.Empty(t, ea.Result.Display[0].Data)
	assert.Equal(t, "1\n", res.Output)
	assert.Equal(t, "iVBOR", string(res.Display[0].Data))
}

// The person's cells are named exactly: a cell between them that an
// agent ran is not counted as the person's.
func TestPersonNoteCells(t *testing.T) {
	s := newSession(&Hub{}, "t")
	console := newWatcher(true)
	s.mu.Lock()
	s.watchLocked(console)
	for cell := 1; cell <= 6; cell++ {
		r := &run{cell: cell, finished: make(chan struct{})}
		s.cur = r
		ctx := context.Background()
		if cell == 3 || cell == 5 || cell == 6 {
			ctx = withWatcher(ctx, console)
		}
		s.cellStartedLocked(ctx, r, "pass")
	}
	s.mu.Unlock()
	assert.Equal(t, "someone worked in this session from `replhub attach`: cells 3, 5-6", s.personNote())
	assert.Equal(t, "", s.personNote(), "once")
}
