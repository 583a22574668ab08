package proto

import (
	"bytes"
	"encoding/json"
	"io"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// Writer writes frames to one worker. Write may be called from any
// goroutine; frames never interleave.
//
// Written counts the bytes written so far, a big payload's as each piece
// of it (at most writePiece, or linkPiece) goes: a caller that must not
// wait for ever on a worker that stopped reading (the hub's relay) sees
// whether a frame under way still moves.
type Writer struct {
	mu    sync.Mutex
	w     io.Writer
	n     atomic.Int64
	piece int // writePiece, or linkPiece
}

// writePiece bounds one write to the stream, so that progress through an
// 8 MiB chunk shows in Written. A relay calls a destination that took no
// piece for 20 s stalled, and an interrupt drops a relay to one that took
// none in 2 s, so the piece sets the slowest reader still seen reading:
// 6.4 KiB/s for the one and 64 KiB/s for the other, which a local worker
// that reads at all passes many times over. A payload smaller than a piece
// still goes with its header in one write, and a local pipe takes 8 MiB
// as fast as in 1 MiB pieces.
const writePiece = 128 << 10

// linkPiece is writePiece for a stream over a network link. An ssh
// channel sends at most 32 KiB in a packet, so a smaller piece costs no
// write of its own, and a link as slow as 16 KiB/s still shows progress
// within an interrupt's round of 2 s (with 128 KiB pieces, below 64 KiB/s
// it looked stopped).
const linkPiece = 32 << 10

// NewWriter writes frames to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w, piece: writePiece} }

// NewLinkWriter writes frames to w, a stream over a network link (an ssh
// channel), counting progress in finer pieces (linkPiece).
func NewLinkWriter(w io.Writer) *Writer { return &Writer{w: w, piece: linkPiece} }

// Piece is the most w hands its stream in one write: Written moves by at
// most that much at a time.
func (w *Writer) Piece() int { return w.piece }

// Written returns how many bytes w has written; it grows while a frame is
// under way, and not while the stream takes nothing.
func (w *Writer) Written() int64 { return w.n.Load() }

// put writes b in pieces of at most w.piece, counting each. w.mu is held.
func (w *Writer) put(b []byte) error {
	for len(b) > 0 {
		piece := b[:min(len(b), w.piece)]
		k, err := w.w.Write(piece)
		w.n.Add(int64(k))
		if err == nil && k < len(piece) {
			err = io.ErrShortWrite
		}
		if err != nil {
			return err
		}
		b = b[k:]
	}
	return nil
}

// A FrameWriter is told where each frame begins and ends: a writer that
// switches streams (a session reattached over a new link) keeps a frame
// written in several pieces on one stream.
type FrameWriter interface {
	BeginFrame()
	EndFrame()
}

// frame tells w's stream, if it asks, that a frame begins; call the
// result when it ends. w.mu is held.
func (w *Writer) frame() func() {
	if fw, ok := w.w.(FrameWriter); ok {
		fw.BeginFrame()
		return fw.EndFrame
	}
	return func() {}
}

// Write sends m, with its Data as the payload. A small payload goes in the
// header's write; a big one (a file chunk) is written from where it lies,
// since copying 8 MiB behind a header costs more than a second write.
func (w *Writer) Write(m Msg) error {
	if x, ok := m.(*Exec); ok && len(x.Code) > 64<<10 {
		return w.writeExec(x)
	}
	data := Data(m)
	buf := framePool.Get().(*bytes.Buffer)
	defer putFrameBuf(buf)
	if err := encodeTo(buf, m); err != nil {
		return err
	}
	if len(data) <= 64<<10 {
		buf.Write(data)
		data = nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	defer w.frame()()
	if err := w.put(buf.Bytes()); err != nil || data == nil {
		return err
	}
	return w.put(data)
}

// framePool holds the buffers frames are encoded in: a frame on the
// round trip of every cell costs no allocation for its line.
var framePool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// putFrameBuf gives buf back to framePool, unless a big payload grew it.
func putFrameBuf(buf *bytes.Buffer) {
	if buf.Cap() <= 128<<10 {
		buf.Reset()
		framePool.Put(buf)
	}
}

// writeExec writes a big cell's frame with its code escaped piece by
// piece: encoding it whole would take two copies of it, and encoding/json
// keeps the bigger one in a pool, so a hub would hold the size of the
// biggest cell it ever ran.
func (w *Writer) writeExec(x *Exec) error {
	head, err := json.Marshal(&struct {
		O     string `json:"op"`
		Cell  int    `json:"cell"`
		Fence string `json:"fence"`
	}{OpExec, x.Cell, x.Fence})
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	defer w.frame()()
	buf := append(head[:len(head)-1:len(head)-1], `,"code":"`...)
	for code := x.Code; code != ""; {
		n := min(len(code), 64<<10)
		for k := 0; k < utf8.UTFMax && n < len(code) && !utf8.RuneStart(code[n]); k++ {
			n--
		}
		piece, err := json.Marshal(code[:n])
		if err != nil {
			return err
		}
		buf = append(buf, piece[1:len(piece)-1]...)
		code = code[n:]
		if len(buf) >= 256<<10 {
			if err := w.put(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
	}
	return w.put(append(buf, "\"}\n"...))
}

// Encode returns m's header line, newline included, with op and len set.
func Encode(m Msg) ([]byte, error) {
	var buf bytes.Buffer
	if err := encodeTo(&buf, m); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// encodeTo appends m's header line to buf, as Encode returns it.
func encodeTo(buf *bytes.Buffer, m Msg) error {
	h := m.head()
	h.O = m.Op()
	h.Len = int64(len(Data(m)))
	return json.NewEncoder(buf).Encode(m)
}

// chunks keeps the chunk buffers given back, for the next chunk of any
// goroutine, the last given back first: a fresh 8 MiB buffer costs
// zeroing and page faults. (A sync.Pool keeps what a P gives back in a
// slot that the other Ps cannot take from, so a transfer whose reader
// moved between Ps got a new buffer on each: 25 MB of the hub's memory
// during a 1 GB put, with one chunk in use at a time.) At most keepChunks
// are kept: as many as a group's transfers at once, each with a chunk in
// hand (a single transfer may hold a few more, which then go to the GC).
// After keepIdle without a chunk given back, none are kept: the GC, by
// an idle process's forced collection at the latest, frees them.
var chunks struct {
	mu   sync.Mutex
	free [][]byte
	idle *time.Timer
}

const (
	keepChunks = 8
	keepIdle   = 10 * time.Second
)

// GetChunk returns a buffer of n bytes, one given back before when n is
// big enough to be a transfer's chunk. PutChunk gives it back.
func GetChunk(n int) []byte {
	if n <= 1<<20 || n > ChunkSize {
		return make([]byte, n)
	}
	chunks.mu.Lock()
	if k := len(chunks.free); k > 0 {
		b := chunks.free[k-1]
		chunks.free[k-1] = nil
		chunks.free = chunks.free[:k-1]
		chunks.mu.Unlock()
		return b[:n]
	}
	chunks.mu.Unlock()
	return make([]byte, n, ChunkSize)
}

// PutChunk gives back a buffer from GetChunk; others are left to the GC.
// The caller must not use b afterwards.
func PutChunk(b []byte) {
	if cap(b) != ChunkSize {
		return
	}
	chunks.mu.Lock()
	defer chunks.mu.Unlock()
	if len(chunks.free) < keepChunks {
		chunks.free = append(chunks.free, b[:ChunkSize])
	}
	if chunks.idle == nil {
		chunks.idle = time.AfterFunc(keepIdle, dropChunks)
	} else {
		chunks.idle.Reset(keepIdle)
	}
}

// dropChunks leaves the buffers kept to the GC.
func dropChunks() {
	chunks.mu.Lock()
	defer chunks.mu.Unlock()
	clear(chunks.free)
	chunks.free = chunks.free[:0]
}
