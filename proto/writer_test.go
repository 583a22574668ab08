package proto

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Written grows piece by piece while a big frame is under way, stays put
// while the stream takes nothing, and counts the whole frame at its end;
// a link's writer counts in its finer pieces.
func TestWriterWrittenShowsProgress(t *testing.T) {
	for _, c := range []struct {
		name  string
		new   func(io.Writer) *Writer
		piece int
	}{{"pipe", NewWriter, writePiece}, {"link", NewLinkWriter, linkPiece}} {
		t.Run(c.name, func(t *testing.T) {
			pr, pw := io.Pipe()
			defer pr.Close()
			w := c.new(pw)
			require.Equal(t, c.piece, w.Piece())
			data := bytes.Repeat([]byte{7}, 3*writePiece+5)
			done := make(chan error, 1)
			go func() { done <- w.Write(&Chunk{Sid: 1, Seq: 0, Data: data}) }()

			// The header, then the first piece: io.Pipe hands over one
			// write at a time, so Written says how far the reader got.
			header := make([]byte, 64<<10)
			n, err := pr.Read(header)
			require.NoError(t, err)
			assert.Eventually(t, func() bool { return w.Written() == int64(n) }, 5*time.Second, time.Millisecond)
			time.Sleep(20 * time.Millisecond)
			assert.Equal(t, int64(n), w.Written(), "a stream that takes nothing shows no progress")

			_, err = io.ReadFull(pr, make([]byte, c.piece))
			require.NoError(t, err)
			assert.Eventually(t, func() bool { return w.Written() == int64(n+c.piece) }, 5*time.Second, time.Millisecond)
			select {
			case err := <-done:
				t.Fatalf("the frame ended before its payload was read: %v", err)
			default:
			}

			_, err = io.ReadFull(pr, make([]byte, len(data)-c.piece))
			require.NoError(t, err)
			require.NoError(t, <-done)
			assert.Equal(t, int64(n+len(data)), w.Written())
		})
	}
}

// A writer whose Write takes less than it is given and says nothing is
// an error, not a loop.
func TestWriterShortWrite(t *testing.T) {
	w := NewWriter(shortWriter{})
	assert.ErrorIs(t, w.Write(&Chunk{Sid: 1, Data: make([]byte, 100<<10)}), io.ErrShortWrite)
}

type shortWriter struct{}

func (shortWriter) Write(p []byte) (int, error) { return len(p) / 2, nil }

// A frame written in pieces stays bracketed whole for a FrameWriter: one
// BeginFrame before its first byte, one EndFrame after its last.
func TestWriterBracketsFrameInPieces(t *testing.T) {
	for _, m := range []Msg{
		&Chunk{Sid: 1, Data: bytes.Repeat([]byte{1}, 2*writePiece+3)},
		&Exec{Cell: 1, Code: string(bytes.Repeat([]byte{'x'}, 600<<10)), Fence: "f"},
		&Ping{ID: 1},
	} {
		fw := &bracketWriter{}
		require.NoError(t, NewWriter(fw).Write(m))
		assert.Equal(t, 1, fw.frames, "%T", m)
		assert.Greater(t, fw.writes, 0)
		assert.Zero(t, fw.outside, "%T: bytes written outside the bracket", m)
		got, err := newReader(&fw.buf, fromHub).Read()
		require.NoError(t, err)
		assert.Equal(t, m.Op(), got.Op())
	}
}

type bracketWriter struct {
	buf                     bytes.Buffer
	in                      bool
	frames, writes, outside int
}

func (w *bracketWriter) BeginFrame() { w.in = true }
func (w *bracketWriter) EndFrame()   { w.in, w.frames = false, w.frames+1 }
func (w *bracketWriter) Write(p []byte) (int, error) {
	w.writes++
	if !w.in {
		w.outside++
	}
	return w.buf.Write(p)
}
