package hub

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/replhub/replhub/wire"
)

// ProtoVersion is the hub ↔ worker protocol version; the worker's ready
// frame must carry the same.
const ProtoVersion = 1

// maxFrameHeader bounds a frame's JSON line; a worker that sends more
// without a newline has a broken stream.
const maxFrameHeader = 16 << 20

// frame is a decoded worker frame header, with the raw bytes that followed
// it when the header had "len".
type frame struct {
	Op string `json:"op"`
	ID int64  `json:"id,omitempty"`
	// ready
	Proto       int    `json:"proto,omitempty"`
	Pid         int    `json:"pid,omitempty"`
	Cwd         string `json:"cwd,omitempty"`
	Executable  string `json:"executable,omitempty"`
	Cloudpickle bool   `json:"cloudpickle,omitempty"`
	// done
	Cell     int             `json:"cell,omitempty"`
	Status   string          `json:"status,omitempty"`
	Value    *string         `json:"value,omitempty"`
	Error    json.RawMessage `json:"error,omitempty"`
	Duration float64         `json:"duration,omitempty"`
	Names    []string        `json:"names,omitempty"`
	RSS      int64           `json:"rss,omitempty"`
	Len      int             `json:"len,omitempty"`
	// req (a session asking the hub), served (a target's answer)
	Kind   string            `json:"kind,omitempty"`
	Target string            `json:"target,omitempty"`
	Py     string            `json:"py,omitempty"`
	Into   *string           `json:"into,omitempty"`
	Src    string            `json:"src,omitempty"`
	Cells  map[string]string `json:"cells,omitempty"`
	Sid    int64             `json:"sid,omitempty"`
	OK     bool              `json:"ok,omitempty"`
	Kept   string            `json:"kept,omitempty"`
	Name   string            `json:"name,omitempty"`
	Host   string            `json:"host,omitempty"`
	Sudo   *bool             `json:"sudo,omitempty"`
	Jump   *[]string         `json:"jump,omitempty"`
	// Python is the version in a ready frame, the interpreter in an open.
	Python string `json:"python,omitempty"`
	// transfers
	Path  string `json:"path,omitempty"`
	Size  int64  `json:"size,omitempty"`
	Mode  uint32 `json:"mode,omitempty"`
	Seq   int64  `json:"seq,omitempty"`
	EOF   bool   `json:"eof,omitempty"`
	First bool   `json:"first,omitempty"`

	data []byte
}

// errorText is a served or reply frame's error as text.
func (f *frame) errorText() string {
	if len(f.Error) == 0 || string(f.Error) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(f.Error, &s) == nil {
		return s
	}
	if ce := f.cellError(); ce != nil {
		if ce.Traceback != "" {
			return ce.Traceback
		}
		return ce.Type + ": " + ce.Message
	}
	return string(f.Error)
}

// cellError decodes a done frame's error, which a worker sends as an
// object, or as a plain string for errors of its own.
func (f *frame) cellError() *wire.CellError {
	if len(f.Error) == 0 || string(f.Error) == "null" {
		return nil
	}
	var ce wire.CellError
	if json.Unmarshal(f.Error, &ce) == nil {
		return &ce
	}
	var s string
	json.Unmarshal(f.Error, &s)
	return &wire.CellError{Type: "Error", Message: s, Traceback: s}
}

// errBrokenStream means the worker's frame stream cannot be resynchronised.
var errBrokenStream = errors.New("worker frame stream broken")

// malformedError is a single bad frame; the stream goes on after it.
type malformedError struct {
	line []byte
	err  error
}

func (e *malformedError) Error() string {
	l := e.line
	if len(l) > 120 {
		l = l[:120]
	}
	return fmt.Sprintf("malformed frame from worker (%v): %q", e.err, l)
}

// readFrame reads one frame. It returns *malformedError for a line that is
// not a frame (the caller reports it and reads on), errBrokenStream for a
// stream that cannot go on, io.EOF at the end.
func readFrame(r *bufio.Reader) (*frame, error) {
	line, err := wire.ReadLine(r, maxFrameHeader)
	if err != nil {
		if errors.Is(err, wire.ErrLineTooLong) {
			return nil, fmt.Errorf("%w: a frame header over %d bytes", errBrokenStream, maxFrameHeader)
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, io.EOF
		}
		return nil, err
	}
	var f frame
	if err := json.Unmarshal(line, &f); err != nil {
		return nil, &malformedError{append([]byte(nil), line...), err}
	}
	if f.Op == "" {
		return nil, &malformedError{append([]byte(nil), line...), errors.New("no op")}
	}
	if f.Len < 0 {
		return nil, &malformedError{append([]byte(nil), line...), errors.New("negative len")}
	}
	if f.Len > 0 {
		f.data = wire.GetChunk(f.Len)
		if _, err := io.ReadFull(r, f.data); err != nil {
			return nil, io.EOF
		}
	}
	return &f, nil
}

// writeFrame writes one frame to a worker; callers hold the session's write
// lock (Session.wmu). A small payload goes in the header's write; a big one
// (a file chunk) is written from where it lies, since copying 8 MiB behind a
// header costs more than the second write.
func writeFrame(w io.Writer, header map[string]any, data []byte) error {
	if data != nil {
		header["len"] = len(data)
	}
	b, err := json.Marshal(header)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if len(data) <= 64<<10 {
		_, err = w.Write(append(b, data...))
		return err
	}
	if _, err = w.Write(b); err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}
