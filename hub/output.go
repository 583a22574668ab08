package hub

import (
	"bytes"

	"github.com/replhub/replhub/proto"
)

// A worker's output reaches the hub on one stream: raw on the stream of
// the hub that started it (readOutput), and in out frames to a hub that
// adopted it or over a reattached link (readFrames). Both go through
// takeOutputLocked, each with a Splitter of its own, since the two may
// be read at the same time (a first link's last bytes as a new link's
// frames come). In order, a chunk is:
//
//  1. fed to sudo's watcher while a root worker starts, and held back
//     whole until the ready frame has told the streams token (the worker
//     marks nothing before it sends that frame, but the two streams are
//     read apart);
//  2. cut at a hand-over's fence (detach), which the worker writes outside
//     any stdout run;
//  3. split into stdout and stderr runs at the stream markers
//     (proto.Splitter);
//  4. cut, in stdout, at the running cell's fence, which the worker writes
//     to its stdout last;
//  5. kept as the session's unread output, merged and per stream.

// readOutput copies the worker's output stream into the session.
func (s *Session) readOutput() {
	defer close(s.outClosed)
	r := newOutputReader(s.proc.Stderr())
	take := func(p []byte) {
		s.mu.Lock()
		s.takeOutputLocked(p, false)
		s.mu.Unlock()
	}
	for {
		if err := r.read(take); err != nil {
			s.mu.Lock()
			s.endEarlyLocked()
			s.rawSplit.Flush(s.takeRunLocked)
			s.flushPendingLocked()
			s.mu.Unlock()
			return
		}
	}
}

// takeOutputLocked takes p, read from the worker's output stream or, with
// framed, from an out frame.
func (s *Session) takeOutputLocked(p []byte, framed bool) {
	if s.watch != nil {
		if err := s.watch.Feed(p); err != nil {
			select {
			case s.verdict <- err:
			default:
			}
		}
	}
	if s.rawSplit == nil {
		s.early = append(s.early, p...)
		if over := len(s.early) - earlyCap; over > 0 {
			s.early = append([]byte(nil), s.early[over:]...)
		}
		return
	}
	split := s.rawSplit
	if framed {
		split = s.frameSplit
	}
	if f := s.detachFence; f != nil {
		data := append(s.detachCarry, p...)
		s.detachCarry = nil
		if i := bytes.Index(data, f); i >= 0 {
			split.Split(data[:i], s.takeRunLocked)
			s.detachFence = nil
			close(s.detachedOut)
			return
		}
		k := proto.PrefixAtEnd(data, f)
		s.detachCarry = append([]byte(nil), data[len(data)-k:]...)
		p = data[:len(data)-k]
	}
	split.Split(p, s.takeRunLocked)
}

// takeRunLocked adds a run of one stream to the unread output, looking
// for the running cell's fence in stdout across chunk boundaries.
func (s *Session) takeRunLocked(stdout bool, p []byte) {
	r := s.cur
	if !stdout || r == nil || r.sealed != nil || len(r.fence) == 0 {
		if stdout {
			s.flushPendingLocked()
		}
		s.out.write(stdout, p)
		return
	}
	data := p
	if len(s.pending) > 0 {
		data = append(s.pending, p...)
		s.pending = nil
	}
	if i := bytes.Index(data, r.fence); i >= 0 {
		s.out.write(true, data[:i])
		s.sealLocked(r)
		s.out.write(true, data[i+len(r.fence):])
		s.maybeFinishLocked(r)
		return
	}
	k := proto.PrefixAtEnd(data, r.fence)
	s.out.write(true, data[:len(data)-k])
	s.pending = append([]byte(nil), data[len(data)-k:]...)
}

// flushPendingLocked gives up on a fence that began to come: its bytes
// are stdout after all.
func (s *Session) flushPendingLocked() {
	if len(s.pending) > 0 {
		s.out.write(true, s.pending)
		s.pending = nil
	}
}

// earlyCap bounds the output held before the ready frame: noise (rc
// files, sudo's words), shown only if the start fails.
const earlyCap = 64 << 10

// setStreamsLocked sets the token the worker marks its streams with (from
// its ready frame), and takes the output held until then; one that is not
// a token (a worker from before the streams has none) marks nothing, and
// all of the output counts as stderr.
func (s *Session) setStreamsLocked(token string) {
	if !proto.ValidStreamsToken(token) {
		token = ""
	}
	s.rawSplit, s.frameSplit = proto.NewSplitter(token), proto.NewSplitter(token)
	early := s.early
	s.early = nil
	s.rawSplit.Split(early, s.takeRunLocked)
}

// endEarlyLocked takes the output held for a ready frame that never came
// as it is.
func (s *Session) endEarlyLocked() {
	if s.rawSplit == nil {
		s.setStreamsLocked("")
	}
}
