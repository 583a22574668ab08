package lean

import (
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// Screen is what a call on a terminal shows before its reply, in package
// early and in package cli alike: the cell's output on Out as it is
// written, and a group's progress ("probe: 12/40 done, 1 failed") on one
// line of Err while hosts are pending. Its methods may be called from
// more than one goroutine (a second Ctrl-C ends it: Close).
type Screen struct {
	Out, Err io.Writer
	mu       sync.Mutex
	open     bool        // the last output did not end a line
	shown    bool        // a progress line is on Err
	closed   atomic.Bool // Close was called: nothing more is shown
}

// Output writes a cell's output as it comes, after wiping a progress line.
func (s *Screen) Output(text string) {
	if text == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return
	}
	s.clearLocked()
	io.WriteString(s.Out, text)
	s.open = text[len(text)-1] != '\n'
}

// EndLine ends an open line of output when more text follows it (the
// reply's). A nil Screen shows nothing.
func (s *Screen) EndLine(more bool) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open && more {
		io.WriteString(s.Out, "\n")
		s.open = false
	}
}

// progressWidth is as wide as a progress line is drawn, so that a shorter
// one wipes a longer.
const progressWidth = 60

// Progress draws p, a group's (Hosts > 0) while some are pending, over the
// line drawn before; anything else wipes that line. A single session's
// progress draws nothing.
func (s *Screen) Progress(p Progress) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return
	}
	if p.Hosts == 0 || p.Done >= p.Hosts {
		s.clearLocked()
		return
	}
	line := p.Session + ": " + strconv.Itoa(p.Done) + "/" + strconv.Itoa(p.Hosts) + " done"
	if p.Failed > 0 {
		line += ", " + strconv.Itoa(p.Failed) + " failed"
	}
	if n := utf8.RuneCountInString(line); n < progressWidth {
		line += blanks[:progressWidth-n]
	}
	io.WriteString(s.Err, "\r"+line)
	s.shown = true
}

// ClearProgress wipes the progress line, if one is shown. A nil Screen
// shows nothing.
func (s *Screen) ClearProgress() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clearLocked()
}

// Close ends the screen for a command about to end with a message of its
// own: the progress line is wiped, an open line of output ended, and
// nothing more is shown. It never waits: while a write holds the screen
// (a terminal that stopped taking output), the lines are left as they
// are.
func (s *Screen) Close() {
	s.closed.Store(true)
	if s.mu.TryLock() {
		s.makeRoomLocked()
		s.mu.Unlock()
	}
}

// Notes is where the command's own notes go (a Ctrl-C's, on Err): each
// one on a line of its own, the progress line wiped and an open line of
// output ended first.
func (s *Screen) Notes() io.Writer { return notes{s} }

type notes struct{ s *Screen }

func (n notes) Write(p []byte) (int, error) {
	n.s.mu.Lock()
	defer n.s.mu.Unlock()
	n.s.makeRoomLocked()
	return n.s.Err.Write(p)
}

// makeRoomLocked wipes the progress line and ends an open line of output,
// for a line of the command's own.
func (s *Screen) makeRoomLocked() {
	s.clearLocked()
	if s.open {
		io.WriteString(s.Out, "\n")
		s.open = false
	}
}

func (s *Screen) clearLocked() {
	if s.shown {
		io.WriteString(s.Err, "\r"+blanks+"\r")
		s.shown = false
	}
}

// blanks is progressWidth spaces (TestScreen).
const blanks = "                                                            "
