package hub

import (
	"bytes"
	"crypto/rand"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readAll reads o to its end, noting each read's size; after each read it
// calls then, when given.
func readAll(t *testing.T, o *outputReader, then ...func()) (got []byte, sizes []int) {
	t.Helper()
	for i := 0; i < 1<<16; i++ {
		err := o.read(func(p []byte) {
			got = append(got, p...)
			sizes = append(sizes, len(p))
			for _, f := range then {
				f()
			}
		})
		if err == io.EOF {
			return got, sizes
		}
		require.NoError(t, err)
	}
	t.Fatal("no end")
	return nil, nil
}

// A pipe's output arrives whole and in order: small reads while it
// trickles, big ones once a read fills its buffer, and EOF at the end.
func TestOutputReaderPipe(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	o := newOutputReader(r)
	require.NotNil(t, o.rc, "a pipe is polled")
	flood := make([]byte, 3<<20)
	rand.Read(flood)
	// The flood is written once the trickle was read, however late the
	// reader runs.
	first := make(chan struct{})
	go func() {
		w.Write([]byte("hello\n"))
		<-first
		w.Write(flood)
		w.Close()
	}()
	got, sizes := readAll(t, o, sync.OnceFunc(func() { close(first) }))
	assert.True(t, bytes.Equal(append([]byte("hello\n"), flood...), got), "the bytes, in order")
	assert.Equal(t, 6, sizes[0], "a trickle is read as it comes")
	assert.Less(t, len(sizes), len(flood)/(32<<10), "a flood is read in big reads (as big as the pipe holds): %v", sizes)
}

// A reader the runtime does not poll (an ssh channel's) is read through a
// borrowed buffer; an adopted worker's output only ends.
func TestOutputReaderOthers(t *testing.T) {
	data := bytes.Repeat([]byte("abc"), 100_000)
	got, sizes := readAll(t, newOutputReader(bytes.NewReader(data)))
	assert.Equal(t, data, got)
	assert.Equal(t, smallRead, sizes[0])
	assert.Contains(t, sizes, bigRead)

	eof := make(chan struct{})
	o := newOutputReader(outputEnd{eof})
	done := make(chan error, 1)
	go func() { done <- o.read(func([]byte) { t.Error("no bytes come") }) }()
	select {
	case <-done:
		t.Fatal("ended before its stream did")
	case <-time.After(20 * time.Millisecond):
	}
	close(eof)
	assert.Equal(t, io.EOF, <-done)
}

// sizedReader is a reader the runtime does not poll that notes the size of
// the buffer of each read that found nothing: the read that would wait.
type sizedReader struct {
	data   []byte
	waited []int
}

func (s *sizedReader) Read(p []byte) (int, error) {
	if len(s.data) == 0 {
		s.waited = append(s.waited, len(p))
		return 0, io.EOF
	}
	n := copy(p, s.data)
	s.data = s.data[n:]
	return n, nil
}

// A reader that is not polled (an ssh channel's) holds its buffer while it
// waits: once a flood is drained, it waits with a small one.
func TestOutputReaderWaitsWithASmallBuffer(t *testing.T) {
	for _, size := range []int{smallRead + 1, 3 * bigRead / 2, 5 * bigRead} {
		s := &sizedReader{data: make([]byte, size)}
		got, _ := readAll(t, newOutputReader(s))
		assert.Len(t, got, size)
		assert.Equal(t, []int{smallRead}, s.waited, "after %d bytes", size)
	}
}
