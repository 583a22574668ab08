package proto

import (
	"encoding/json"
	"io"
	"sync"
)

// Writer writes frames to one worker. Write may be called from any
// goroutine; frames never interleave.
type Writer struct {
	mu sync.Mutex
	w  io.Writer
}

// NewWriter writes frames to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write sends m, with its Data as the payload. A small payload goes in the
// header's write; a big one (a file chunk) is written from where it lies,
// since copying 8 MiB behind a header costs more than a second write.
func (w *Writer) Write(m Msg) error {
	b, err := Encode(m)
	if err != nil {
		return err
	}
	data := Data(m)
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(data) <= 64<<10 {
		_, err = w.w.Write(append(b, data...))
		return err
	}
	if _, err = w.w.Write(b); err != nil {
		return err
	}
	_, err = w.w.Write(data)
	return err
}

// Encode returns m's header line, newline included, with op and len set.
func Encode(m Msg) ([]byte, error) {
	h := m.head()
	h.O = m.Op()
	h.Len = int64(len(Data(m)))
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

var chunkPool = sync.Pool{New: func() any { b := make([]byte, ChunkSize); return &b }}

// GetChunk returns a buffer of n bytes, from a pool when n is big enough
// to be a transfer's chunk: fresh 8 MiB buffers cost zeroing and page
// faults each time. PutChunk gives it back.
func GetChunk(n int) []byte {
	if n > 1<<20 && n <= ChunkSize {
		return (*chunkPool.Get().(*[]byte))[:n]
	}
	return make([]byte, n)
}

// PutChunk gives back a buffer from GetChunk; others are left to the GC.
// The caller must not use b afterwards.
func PutChunk(b []byte) {
	if cap(b) == ChunkSize {
		b = b[:ChunkSize]
		chunkPool.Put(&b)
	}
}
