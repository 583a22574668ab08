package hub

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/proto"
)

// seg is a run of one stream in a worker's output.
type seg struct {
	stdout bool
	text   string
}

// marked is segs as a worker's pump writes them, with fence in stdout
// after the first at segments.
func marked(token string, fence []byte, at int, segs []seg) []byte {
	open, closing := proto.StreamMarkers(token)
	var b []byte
	for i, sg := range segs {
		if i == at {
			b = append(append(append(b, open...), fence...), closing...)
		}
		if sg.stdout {
			b = append(append(append(b, open...), sg.text...), closing...)
		} else {
			b = append(b, sg.text...)
		}
	}
	return b
}

// feed gives stream to a session running a cell with fence, in chunks
// of the sizes given in turn, and ends the stream as readOutput does.
func feed(token string, fence, stream []byte, sizes []int) (*run, *Session) {
	s := &Session{}
	s.setStreamsLocked(token)
	r := &run{cell: 1, fence: fence, finished: make(chan struct{})}
	s.cur = r
	for i, k := 0, 0; i < len(stream); k++ {
		n := len(stream) - i
		if len(sizes) > 0 {
			n = min(n, sizes[k%len(sizes)])
		}
		s.takeOutputLocked(stream[i:i+n], false)
		i += n
	}
	s.rawSplit.Flush(s.takeRunLocked)
	s.flushPendingLocked()
	return r, s
}

// The streams come apart, the merged output keeps their order, and the
// cell's fence cuts all three at the same point, whatever the chunking.
func TestStreamsAndFenceAcrossChunks(t *testing.T) {
	token, fence := proto.NewStreamsToken(), newFence()
	segs := []seg{{true, "out 1\n"}, {false, "err 1\n"}, {true, "out 2\n"}, {true, "out 3\n"},
		{false, "err \x1e\x1f 2\n"}, {true, "after\n"}, {false, "late err\n"}}
	stream := marked(token, fence, 5, segs)
	for size := 1; size <= len(stream); size++ {
		r, s := feed(token, fence, stream, []int{size})
		if !assert.NotNil(t, r.sealed, "chunk size %d", size) {
			continue
		}
		assert.Equal(t, "out 1\nerr 1\nout 2\nout 3\nerr \x1e\x1f 2\n", r.sealed.all.text, "chunk size %d", size)
		assert.Equal(t, "out 1\nout 2\nout 3\n", r.sealed.stdout.text, "chunk size %d", size)
		assert.Equal(t, "err 1\nerr \x1e\x1f 2\n", r.sealed.stderr.text, "chunk size %d", size)
		rest := s.out.take()
		assert.Equal(t, "after\nlate err\n", rest.all.text, "chunk size %d", size)
		assert.Equal(t, "after\n", rest.stdout.text)
		assert.Equal(t, "late err\n", rest.stderr.text)
	}
}

// A session without a token (a worker from before the streams) has all
// of its output as stderr.
func TestStreamsWithoutToken(t *testing.T) {
	s := &Session{}
	s.setStreamsLocked("")
	s.takeOutputLocked([]byte("\x1e\x1fabc1\x1f\x1eplain"), false)
	out := s.out.take()
	assert.Equal(t, "\x1e\x1fabc1\x1f\x1eplain", out.all.text)
	assert.Equal(t, out.all.text, out.stderr.text)
	assert.Empty(t, out.stdout.text)
}

// FuzzOutputSplitter: any chunking of the same output gives the same
// result (the fence found at the same place, the same three texts); it
// never panics; no marker's bytes reach the output; each stream is what
// was written to it.
func FuzzOutputSplitter(f *testing.F) {
	f.Add([]byte("\x13out\x04err\x12\x1e\x1f\x02zz"), []byte{1, 2, 3}, uint8(1))
	f.Add([]byte("\x1f\x1e\x1f\x1e\x1f\x1e\x1f\x1e\x1f\x1e\x1f\x1e"), []byte{7}, uint8(0))
	f.Add([]byte{0x15, 0x1e, 0x1e, 0x1f, 0x1e, 0x1f, 0x03, 'a', 'b', 'c'}, []byte{1}, uint8(2))
	token, fence := "00112233aabbccdd", []byte("\x1e\x1freplhub-fence-0f0f\x1f\x1e")
	f.Fuzz(func(t *testing.T, script, chunks []byte, at uint8) {
		// script: a length byte (low nibble; 0x10 says stdout) and that
		// many bytes of a run, in turn.
		var segs []seg
		var wantOut, wantErr []byte
		for i := 0; i < len(script); {
			n := int(script[i] & 0x0f)
			sg := seg{stdout: script[i]&0x10 != 0}
			i++
			text := script[i:min(i+n, len(script))]
			i += len(text)
			// A run of the worker's never holds a marker whole, nor the fence.
			text = bytes.ReplaceAll(text, []byte("\x1e\x1f"+token), nil)
			text = bytes.ReplaceAll(text, fence, nil)
			if len(text) == 0 {
				continue
			}
			sg.text = string(text)
			segs = append(segs, sg)
		}
		cut := int(at) % (len(segs) + 1)
		for i, sg := range segs {
			if i >= cut {
				break
			}
			if sg.stdout {
				wantOut = append(wantOut, sg.text...)
			} else {
				wantErr = append(wantErr, sg.text...)
			}
		}
		stream := marked(token, fence, cut, segs)
		if cut == len(segs) {
			open, closing := proto.StreamMarkers(token)
			stream = append(append(append(stream, open...), fence...), closing...)
		}
		var sizes []int
		for _, c := range chunks {
			sizes = append(sizes, 1+int(c%64))
		}
		r1, s1 := feed(token, fence, stream, nil)
		r2, s2 := feed(token, fence, stream, sizes)
		require.NotNil(t, r1.sealed, "the fence was not found")
		require.NotNil(t, r2.sealed, "the fence was not found in chunks %v", sizes)
		assert.Equal(t, *r1.sealed, *r2.sealed)
		assert.Equal(t, s1.out.take(), s2.out.take())
		sealed := r2.sealed
		for _, text := range []string{sealed.all.text, sealed.stdout.text, sealed.stderr.text} {
			assert.NotContains(t, text, "\x1e\x1f"+token)
		}
		// Invalid UTF-8 is shown as U+FFFD: compare what renders alike.
		assert.Equal(t, render(nil, whole(wantOut), 0, ReplyCap).text, sealed.stdout.text)
		assert.Equal(t, render(nil, whole(wantErr), 0, ReplyCap).text, sealed.stderr.text)
	})
}

// Output that comes before the ready frame is held whole, and split once
// the frame has told the token.
func TestOutputHeldUntilReady(t *testing.T) {
	token := proto.NewStreamsToken()
	s := &Session{}
	stream := marked(token, nil, -1, []seg{{false, "noise\n"}, {true, "out\n"}, {false, "err\n"}})
	s.takeOutputLocked(stream[:10], false)
	s.takeOutputLocked(stream[10:], false)
	assert.Zero(t, s.out.len())
	s.setStreamsLocked(token)
	out := s.out.take()
	assert.Equal(t, "noise\nout\nerr\n", out.all.text)
	assert.Equal(t, "out\n", out.stdout.text)
	// A worker that never sent one: its words are shown as they came.
	s = &Session{}
	s.takeOutputLocked([]byte("Traceback: boom\n"), false)
	s.endEarlyLocked()
	assert.Equal(t, "Traceback: boom\n", s.out.take().stderr.text)
}
