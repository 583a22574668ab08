package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"

	"github.com/replhub/replhub/internal/lean"
	"github.com/replhub/replhub/sudo"
)

// MaxPassword bounds Request.PasswordLen.
const MaxPassword = sudo.MaxPassword

// WriteRequest sends req as one JSON line and, when req carries a
// password, its raw bytes right after the newline, in the same write: the
// buffer that held them is zeroed.
func WriteRequest(w io.Writer, req Request) error {
	if len(req.Password) > MaxPassword {
		return fmt.Errorf("wire: the password is longer than %d bytes", MaxPassword)
	}
	req.PasswordLen = len(req.Password)
	var b []byte
	var err error
	if p, ok := plain(&req); ok {
		b, ok = lean.AppendRequest(nil, p)
		if !ok {
			return errors.New("wire: json: unsupported value: the timeout")
		}
	} else {
		b, err = json.Marshal(req)
		if err != nil {
			return fmt.Errorf("wire: %w", err)
		}
		b = append(b, '\n')
	}
	b = append(b, req.Password...)
	_, err = w.Write(b)
	sudo.Zero(b)
	return err
}

// plain returns req as a lean.Request when it sets no other field: an
// exec, a wait, a list or a query, the commonest requests, which lean writes as encoding/json would
// (TestWriteRequestAsMarshal), without encoding/json's reflection.
func plain(req *Request) (lean.Request, bool) {
	if req.V != lean.Protocol {
		return lean.Request{}, false
	}
	p := lean.Request{Op: req.Op, Name: req.Name, Code: req.Code, Timeout: req.Timeout, NoWait: req.NoWait, Cell: req.Cell,
		Queue: req.Queue, Python: req.Python, Cwd: req.Cwd, Env: req.Env, Host: req.Host, Sudo: req.Sudo, Progress: req.Progress,
		Expr: req.Expr, Text: req.Text, All: req.All, KeepImports: req.KeepImports,
		MaxOutput: req.MaxOutput, Private: req.Private, Limit: req.Limit, Wait: req.Wait, Stream: req.Stream, Plain: req.Plain, JSON: req.JSON}
	rest := *req
	rest.V, rest.Op, rest.Name, rest.Code, rest.Timeout, rest.NoWait, rest.Cell, rest.Queue = 0, "", "", "", 0, false, 0, false
	rest.Python, rest.Cwd, rest.Env, rest.Host, rest.Sudo, rest.Progress = "", "", nil, "", false, false
	rest.Expr, rest.Text, rest.All, rest.KeepImports = "", "", false, false
	rest.MaxOutput, rest.Private, rest.Limit, rest.Wait, rest.Stream, rest.Plain, rest.JSON = 0, false, 0, 0, false, false, false
	return p, reflect.ValueOf(&rest).Elem().IsZero()
}

// RequestError is a request line the Reader could not take: malformed
// JSON (the Reader then goes on with the next line), a line too long or a
// bad password length (the stream is out of step: later reads fail).
type RequestError struct{ Reason string }

func (e *RequestError) Error() string { return "wire: bad request: " + e.Reason }

// ErrOutOfStep is returned by every read after a request whose end could
// not be found.
var ErrOutOfStep = errors.New("wire: the request stream is out of step after a bad request")

// readerSize is the most a Reader's buffer keeps once a bigger request is
// over; readerStart is its first size, which holds a usual request (the
// caller's environment is most of it) and is all that each of many
// clients connected at once costs.
const (
	readerSize  = 64 << 10
	readerStart = 8 << 10
)

// Reader reads requests: JSON lines, each followed by PasswordLen raw
// bytes when it says so. It exists, instead of a bufio.Reader, because it
// owns its buffer: the bytes of a password that arrived with the line are
// copied into Request.Password and wiped from the buffer at once, and the
// rest is read from the connection straight into Request.Password. So the
// only copy is the one the caller zeroes.
//
// A Reader is not safe for concurrent use.
type Reader struct {
	r   io.Reader
	buf []byte
	i   int // buf[i:j] is read and not yet consumed
	j   int
	max int
	err error // sticky: ErrOutOfStep or the reader's own error
}

// NewReader reads requests of at most MaxLine bytes from r.
func NewReader(r io.Reader) *Reader {
	return &Reader{r: r, max: MaxLine}
}

// ReadRequest reads the next request. It returns io.EOF when the stream
// ends between requests, io.ErrUnexpectedEOF when it ends inside one, and
// a *RequestError for a request it cannot take (see RequestError).
func (r *Reader) ReadRequest() (*Request, error) {
	if r.err != nil {
		return nil, r.err
	}
	line, err := r.readLine()
	if err != nil {
		return nil, r.fail(err)
	}
	req := new(Request)
	if err := json.Unmarshal(line, req); err != nil {
		// A broken client might have sent anything on this line,
		// a password too: it is wiped.
		clear(line)
		return nil, &RequestError{fmt.Sprintf("malformed JSON: %v", err)}
	}
	n := req.PasswordLen
	if n < 0 || n > MaxPassword {
		return nil, r.fail(&RequestError{fmt.Sprintf("password_len %d is not between 0 and %d", n, MaxPassword)})
	}
	if n == 0 {
		return req, nil
	}
	pw := make([]byte, n)
	k := copy(pw, r.buf[r.i:r.j])
	clear(r.buf[r.i : r.i+k])
	r.i += k
	if _, err := io.ReadFull(r.r, pw[k:]); err != nil {
		sudo.Zero(pw)
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, r.fail(err)
	}
	req.Password = pw
	return req, nil
}

// fail makes later reads return ErrOutOfStep (or the reader's error) and
// returns err.
func (r *Reader) fail(err error) error {
	r.err = ErrOutOfStep
	if _, bad := err.(*RequestError); !bad {
		r.err = err
	}
	return err
}

// readLine returns the next line, newline included, as a slice of buf that
// is valid until the next read.
func (r *Reader) readLine() ([]byte, error) {
	if len(r.buf) > readerSize && r.j-r.i <= readerSize {
		// A big request is over: give its buffer back.
		buf := make([]byte, readerSize)
		r.j = copy(buf, r.buf[r.i:r.j])
		clear(r.buf)
		r.buf, r.i = buf, 0
	}
	scanned := 0
	for {
		if k := bytes.IndexByte(r.buf[r.i+scanned:r.j], '\n'); k >= 0 {
			end := r.i + scanned + k + 1
			line := r.buf[r.i:end]
			r.i = end
			return line, nil
		}
		scanned = r.j - r.i
		if scanned > r.max {
			return nil, &RequestError{fmt.Sprintf("a line longer than %d bytes", r.max)}
		}
		if err := r.fill(); err != nil {
			if err == io.EOF && r.j > r.i {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
}

// fill reads more bytes into buf, moving the unconsumed ones to its front
// and growing it when they fill it. A password is consumed as soon as its
// line is; but after a line that was not JSON, a password it announced is
// read as the next line, so the bytes a move or a growth leaves behind are
// wiped.
func (r *Reader) fill() error {
	if r.i > 0 {
		j := r.j
		r.j = copy(r.buf, r.buf[r.i:r.j])
		clear(r.buf[r.j:j])
		r.i = 0
	}
	if r.j == len(r.buf) {
		buf := make([]byte, min(max(readerStart, 2*len(r.buf)), r.max+1))
		copy(buf, r.buf[:r.j])
		clear(r.buf)
		r.buf = buf
	}
	for {
		n, err := r.r.Read(r.buf[r.j:])
		r.j += n
		if n > 0 {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
