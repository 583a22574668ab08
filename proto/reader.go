package proto

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/replhub/replhub/wire"
)

// Malformed is a line that is not a usable frame: not JSON, no op, an op
// this side does not take, a key its type does not have. The stream stays
// in step (a payload it announced was skipped) and goes on.
type Malformed struct {
	// Line is the offending line, newline included.
	Line []byte
	Err  error
}

func (e *Malformed) Error() string {
	l := e.Line
	if len(l) > 120 {
		l = l[:120]
	}
	return fmt.Sprintf("malformed frame (%v): %q", e.Err, l)
}

// Violation is a header that breaks the protocol's bounds, or a frame
// half sent: nothing after it can be read in step. The session that sent
// it must end.
type Violation struct {
	Reason string
}

func (e *Violation) Error() string { return "protocol violation: " + e.Reason }

// Reader reads the frames one side sends, validating each header before it
// allocates anything for the frame. It is not safe for concurrent Reads;
// Stalled may be called from any goroutine.
type Reader struct {
	// MaxBlob bounds a req's or served's payload; zero means DefaultMaxBlob.
	MaxBlob int64

	br  *bufio.Reader
	src *watched
	ops map[string]func() Msg
	// since is when the frame being read began (unix ns), zero between
	// frames.
	since atomic.Int64
}

// NewReader reads the frames a worker sends (the hub's side).
func NewReader(r io.Reader) *Reader { return newReader(r, fromWorker) }

func newReader(r io.Reader, ops map[string]func() Msg) *Reader {
	w := &watched{r: r}
	return &Reader{br: bufio.NewReaderSize(w, readBuf), src: w, ops: ops}
}

// readBuf is a Reader's buffer: one for every session the hub holds, idle
// or not, so it is a page. It holds a usual header whole; a longer header
// is read in pieces, and a payload bigger than it goes past it, straight
// into the frame's own buffer.
const readBuf = 4 << 10

// Reset drops what is buffered of a stream that ended, perhaps mid-frame
// (a link that dropped), and reads on from the same source, which now
// starts at a frame's beginning (the next link). Call it where Read is
// called.
func (r *Reader) Reset() {
	r.br.Reset(r.src)
	r.since.Store(0)
}

// Stalled reports how long a frame has been half read while its sender
// sent nothing more: the time since the reader began to wait for the rest
// of it, or 0 when no frame is half read or the reader is not waiting.
func (r *Reader) Stalled() time.Duration {
	if r.since.Load() == 0 {
		return 0
	}
	w := r.src.waiting.Load()
	if w == 0 {
		return 0
	}
	return time.Duration(time.Now().UnixNano() - w)
}

// Read returns the next frame. Errors: io.EOF at the end (also for a
// frame the end cut short), *Malformed for a line that was dropped (read
// on), *Violation for a stream that cannot go on, or the underlying
// reader's error.
func (r *Reader) Read() (Msg, error) {
	if _, err := r.br.Peek(1); err != nil {
		return nil, err
	}
	r.since.Store(time.Now().UnixNano())
	defer r.since.Store(0)
	line, err := wire.ReadLine(r.br, MaxHeader)
	if err != nil {
		if errors.Is(err, wire.ErrLineTooLong) {
			return nil, &Violation{fmt.Sprintf("a frame header over %d bytes", MaxHeader)}
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, io.EOF
		}
		return nil, err
	}
	if m, n, ok := r.decodeUsual(line); ok {
		if n > 0 {
			data, err := r.readPayload(m, n)
			if err != nil {
				return nil, err
			}
			*payload(m) = data
		}
		return m, nil
	}
	var peek struct {
		Op  json.RawMessage `json:"op"`
		Len json.RawMessage `json:"len"`
	}
	if err := json.Unmarshal(line, &peek); err != nil {
		return nil, malformed(line, err)
	}
	n, err := parseLen(peek.Len)
	if err != nil {
		return nil, &Violation{fmt.Sprintf("%v in %s", err, clip(line))}
	}
	var op string
	if json.Unmarshal(peek.Op, &op) != nil || op == "" {
		return nil, r.drop(line, n, errors.New("no op"))
	}
	mk, ok := r.ops[op]
	if !ok {
		return nil, r.drop(line, n, fmt.Errorf("unknown op %q", op))
	}
	m := mk()
	if max := r.maxLen(m); n > max {
		if max == 0 {
			return nil, &Violation{fmt.Sprintf("a %s frame with a payload (len %d)", op, n)}
		}
		return nil, &Violation{fmt.Sprintf("a %s frame with len %d, over its bound of %d", op, n, max)}
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(m); err != nil {
		return nil, r.drop(line, n, err)
	}
	// A len key that is null after one that is not leaves the decoded
	// len at the earlier; the payload read is the peek's.
	m.head().Len = n
	if n > 0 {
		data, err := r.readPayload(m, n)
		if err != nil {
			return nil, err
		}
		*payload(m) = data
	}
	return m, nil
}

// decodeUsual decodes a usual frame in one pass: its line begins with its
// op, as every frame a worker writes does, and it decodes strictly, with
// a len within its op's bound. ok is false for anything else, which the
// full path reads again to say what is wrong with it (peek first, then
// decode), so a bad line is told apart exactly as before.
func (r *Reader) decodeUsual(line []byte) (m Msg, n int64, ok bool) {
	op, ok := leadingOp(line)
	if !ok {
		return nil, 0, false
	}
	mk, ok := r.ops[op]
	if !ok {
		return nil, 0, false
	}
	m = mk()
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if dec.Decode(m) != nil || len(bytes.Trim(line[dec.InputOffset():], " \t\r\n")) > 0 || nullHead(line) {
		return nil, 0, false
	}
	h := m.head()
	if h.O != op || h.Len < 0 || h.Len > r.maxLen(m) {
		return nil, 0, false // a second op key, or a len out of bounds
	}
	return m, h.Len, true
}

// nullHead reports whether line may give an op or len key the value null:
// decoding a null leaves the op and len an earlier key gave, where the
// full path's peek takes the null (no op, no payload). It errs towards
// true: a key written with escapes, or one in a nested object, counts.
func nullHead(line []byte) bool {
	for i := 0; ; {
		j := bytes.Index(line[i:], []byte("null"))
		if j < 0 {
			return false
		}
		i += j + len("null")
		k := bytes.TrimRight(line[:i-len("null")], " \t\r\n")
		if !bytes.HasSuffix(k, []byte(":")) {
			continue
		}
		k = bytes.TrimRight(k[:len(k)-1], " \t\r\n")
		if !bytes.HasSuffix(k, []byte(`"`)) {
			continue
		}
		k = k[:len(k)-1]
		key := k[bytes.LastIndexByte(k, '"')+1:]
		if bytes.IndexByte(key, '\\') >= 0 || bytes.EqualFold(key, []byte("op")) || bytes.EqualFold(key, []byte("len")) {
			return true
		}
	}
}

// leadingOp is the op of a line that begins {"op":"NAME" with NAME of
// lower-case letters and _; ok is false for any other line.
func leadingOp(line []byte) (string, bool) {
	const lead = `{"op":"`
	if !bytes.HasPrefix(line, []byte(lead)) {
		return "", false
	}
	rest := line[len(lead):]
	for i, c := range rest {
		switch {
		case c == '"' && i > 0:
			return string(rest[:i]), true
		case c == '_' || 'a' <= c && c <= 'z':
		default:
			return "", false
		}
	}
	return "", false
}

// maxLen is the largest payload m's op may carry.
func (r *Reader) maxLen(m Msg) int64 {
	switch m.(type) {
	case *Chunk:
		return ChunkSize
	case *Out:
		return OutSize
	case *Done:
		return DisplaySize
	case *Req, *Served, *Reply, *Serve:
		if r.MaxBlob > 0 {
			return r.MaxBlob
		}
		return DefaultMaxBlob
	}
	return 0
}

// readPayload reads n bytes. A chunk goes into a pooled buffer; a blob
// grows as its bytes arrive, so that a header alone never makes the hub
// hold the whole bound.
func (r *Reader) readPayload(m Msg, n int64) ([]byte, error) {
	if _, ok := m.(*Chunk); ok {
		b := GetChunk(int(n))
		if _, err := io.ReadFull(r.br, b); err != nil {
			PutChunk(b)
			return nil, io.EOF
		}
		return b, nil
	}
	const step = 16 << 20
	b := make([]byte, min(n, step))
	got := 0
	for {
		k, err := io.ReadFull(r.br, b[got:])
		got += k
		if err != nil {
			return nil, io.EOF
		}
		if int64(got) == n {
			return b, nil
		}
		nb := make([]byte, min(2*int64(len(b)), n))
		copy(nb, b)
		b = nb
	}
}

// drop skips a dropped line's payload, if it announced one, so that the
// stream stays in step.
func (r *Reader) drop(line []byte, n int64, err error) error {
	if n > ChunkSize {
		return &Violation{fmt.Sprintf("%v, with a payload of %d bytes", err, n)}
	}
	if n > 0 {
		if _, derr := r.br.Discard(int(n)); derr != nil {
			return io.EOF
		}
	}
	return malformed(line, err)
}

func malformed(line []byte, err error) *Malformed {
	return &Malformed{Line: append([]byte(nil), line...), Err: err}
}

// parseLen reads a header's len: absent, or a whole number from 0 up.
func parseLen(raw json.RawMessage) (int64, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("bad len %.40s", raw)
	}
	return n, nil
}

func clip(line []byte) string {
	if len(line) > 120 {
		line = line[:120]
	}
	return strconv.Quote(string(line))
}

// watched records when its reader began to wait in a Read.
type watched struct {
	r       io.Reader
	waiting atomic.Int64 // unix ns, zero when not in a Read
}

func (w *watched) Read(p []byte) (int, error) {
	w.waiting.Store(time.Now().UnixNano())
	n, err := w.r.Read(p)
	w.waiting.Store(0)
	return n, err
}
