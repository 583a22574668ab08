package mcp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/replhub/replhub/internal/lazyre"
)

// maxLine bounds one line from the client: 16 MiB, the SDK's own bound for
// a message (sdk.DefaultMaxLineLength), which its transport cannot pass
// anyway, so that every message the server took before is taken still. A
// longer line is read to its end and dropped as it comes: the server holds
// at most this much of one line.
const maxLine = sdk.DefaultMaxLineLength

// lineReader is the client's input as the SDK reads it: one line at a
// time, each passed on only when it is one JSON-RPC message (a request, a
// notification or a response). The SDK ends the connection at the first
// message it cannot read, and with it every call in flight: so any other
// line is answered here, with the error JSON-RPC 2.0 gives it, and left
// out. A batch is refused: MCP has had none since 2025-06-18; the SDK's own
// check of the version never ran behind cancelTransport, and a cancelled
// request's dropped reply held back the reply to its whole batch.
type lineReader struct {
	in   *bufio.Reader
	c    io.Closer
	out  io.Writer // shared with the SDK: see lockedWriter
	max  int
	line []byte
	tail []byte // the end of a line longer than max
	rest []byte // what is left to pass on of the last message
}

func newLineReader(in io.ReadCloser, out io.Writer, max int) *lineReader {
	return &lineReader{in: bufio.NewReaderSize(in, 64<<10), c: in, out: out, max: max}
}

func (r *lineReader) Read(p []byte) (int, error) {
	for len(r.rest) == 0 {
		line, long, err := r.readLine()
		if err != nil {
			return 0, err
		}
		msg, reply := check(line, r.tail, long, r.max)
		if reply != nil {
			if _, err := r.out.Write(reply); err != nil {
				return 0, err
			}
		}
		r.rest = msg
	}
	n := copy(p, r.rest)
	r.rest = r.rest[n:]
	return n, nil
}

func (r *lineReader) Close() error { return r.c.Close() }

// readLine returns the next line, without its newline, and whether it was
// longer than r.max (then only its head is returned). The last line may
// lack its newline; after it comes the error that ended the input.
func (r *lineReader) readLine() (line []byte, long bool, err error) {
	if cap(r.line) > 1<<20 {
		r.line = nil // a long line's buffer is not kept
	}
	r.line, r.tail = r.line[:0], r.tail[:0]
	for {
		chunk, err := r.in.ReadSlice('\n')
		if !long {
			// The head is kept up to the bound and a byte (which tells
			// a line over it), the rest's end as its tail.
			head := min(len(chunk), r.max+1-len(r.line))
			r.line = append(r.line, chunk[:head]...)
			chunk, long = chunk[head:], head < len(chunk)
		}
		if long {
			r.tail = append(r.tail, chunk...)
			if len(r.tail) > 2*tailKept {
				r.tail = append(r.tail[:0], r.tail[len(r.tail)-tailKept:]...)
			}
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF && (len(r.line) > 0 || long):
		case err != nil:
			return nil, false, err
		}
		line = bytes.TrimSuffix(r.line, []byte("\n"))
		return line, long || len(line) > r.max, nil
	}
}

// check returns a line as the message to pass on, with its newline, or the
// error reply it gets instead; a blank line gets neither. A line longer
// than max comes as its head and its tail.
func check(line, tail []byte, long bool, max int) (msg, reply []byte) {
	msg = bytes.Trim(line, " \t\r\n")
	switch {
	case long:
		return nil, errorReply(longID(line, tail), jsonrpc.CodeInvalidRequest, fmt.Sprintf("Invalid Request: a message longer than %d bytes", max))
	case len(msg) == 0:
		return nil, nil
	case !json.Valid(msg):
		return nil, errorReply(nil, jsonrpc.CodeParseError, "Parse error")
	case msg[0] == '[':
		return nil, errorReply(nil, jsonrpc.CodeInvalidRequest, "Invalid Request: batches are not supported")
	}
	if _, err := jsonrpc.DecodeMessage(msg); err != nil {
		why := err.Error()
		if len(why) > 200 {
			why = why[:200] + "..."
		}
		return nil, errorReply(requestID(msg), jsonrpc.CodeInvalidRequest, "Invalid Request: "+why)
	}
	return append(msg, '\n'), nil
}

// tailKept is how much of the end of a line over the bound is kept, to
// find its id.
const tailKept = 1 << 10

// longID is the id of a request cut at the bound, so that the client's
// call fails at once rather than at its own timeout: read at the head of
// the message, before the first value that does not end within it, or at
// its end, where the TypeScript SDK writes it (`{"method":…,"params":…,
// "jsonrpc":"2.0","id":7}`): a number or a string as the top-level
// object's last member. nil when neither tells.
func longID(head, tail []byte) json.RawMessage {
	d := json.NewDecoder(bytes.NewReader(head))
	if t, err := d.Token(); err == nil && t == json.Delim('{') {
		for d.More() {
			k, err := d.Token()
			var v json.RawMessage
			if err != nil || d.Decode(&v) != nil {
				break
			}
			if k == "id" {
				return validID(v)
			}
		}
	}
	if m := lastID.FindStringSubmatch(string(bytes.TrimRight(tail, " \t\r\n"))); m != nil {
		return validID(json.RawMessage(m[1]))
	}
	return nil
}

// lastID is a top-level object's last member, when it is an id: its
// closing brace the line's last byte, and no other before it (a nested
// object ends in more).
var lastID = lazyre.New(`[,{]\s*"id"\s*:\s*(-?[0-9][0-9.eE+-]*|"(?:[^"\\]|\\.)*")\s*\}$`)

// validID is id when it is a number or a string, else nil.
func validID(id json.RawMessage) json.RawMessage {
	if len(id) > 0 && (id[0] == '"' || id[0] == '-' || id[0] >= '0' && id[0] <= '9') && json.Valid(id) {
		return id
	}
	return nil
}

// requestID is the id of an invalid request (valid JSON, with a method),
// when it is a string or a number, so that the client's call fails at
// once; anything else is answered with id null, as JSON-RPC says.
func requestID(msg []byte) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(msg, &m) != nil || m["method"] == nil {
		return nil
	}
	return validID(m["id"])
}

func errorReply(id json.RawMessage, code int64, message string) []byte {
	if id == nil {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   jsonrpc.Error   `json:"error"`
	}{"2.0", id, jsonrpc.Error{Code: code, Message: message}})
	return append(b, '\n')
}

// lockedWriter keeps each message whole: the SDK writes each of its
// messages with one Write, and lineReader its replies, from another
// goroutine.
type lockedWriter struct {
	mu sync.Mutex
	w  io.WriteCloser
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

func (w *lockedWriter) Close() error { return w.w.Close() }
