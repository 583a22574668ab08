package wire

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWriteRequest(t *testing.T) {
	pw := []byte("s3cret\n\x00é")
	var b bytes.Buffer
	require.NoError(t, WriteRequest(&b, Request{V: Version, Op: OpExec, Name: "ops", Sudo: true, Password: pw}))
	line, rest, ok := bytes.Cut(b.Bytes(), []byte("\n"))
	require.True(t, ok)
	assert.JSONEq(t, `{"v":2,"op":"exec","name":"ops","sudo":true,"password_len":10}`, string(line))
	assert.Equal(t, pw, rest, "the raw bytes follow the newline")
	assert.NotContains(t, b.String(), base64.StdEncoding.EncodeToString(pw))

	req, err := NewReader(&b).ReadRequest()
	require.NoError(t, err)
	assert.Equal(t, pw, req.Password)
	assert.Equal(t, "ops", req.Name)

	assert.Error(t, WriteRequest(io.Discard, Request{Password: make([]byte, MaxPassword+1)}))
}

func TestReadRequest(t *testing.T) {
	var bad *RequestError
	tests := []struct {
		name string
		in   string
		// want is one entry per read: an op, "pw:" and a password, or an
		// error: "bad" (*RequestError), "step" (ErrOutOfStep), "eof",
		// "unexpected".
		want []string
	}{
		{"plain", `{"op":"ping"}` + "\n", []string{"ping", "eof"}},
		{"password and more", `{"op":"exec","password_len":3}` + "\nabc" + `{"op":"ping"}` + "\n", []string{"pw:abc", "ping", "eof"}},
		{"a password holds newlines", `{"op":"exec","password_len":3}` + "\n\n\n\n", []string{"pw:\n\n\n", "eof"}},
		{"malformed then good", "not json\n" + `{"op":"ping"}` + "\n", []string{"bad", "ping", "eof"}},
		{"negative length", `{"op":"exec","password_len":-1}` + "\nabc\n", []string{"bad", "step", "step"}},
		{"huge length", `{"op":"exec","password_len":99999999999}` + "\n", []string{"bad", "step"}},
		{"half a line", `{"op":"pi`, []string{"unexpected", "unexpected"}},
		{"eof in the password", `{"op":"exec","password_len":10}` + "\nabc", []string{"unexpected", "unexpected"}},
		{"a line too long", strings.Repeat("x", 100) + "\n" + `{"op":"ping"}` + "\n", []string{"bad", "step"}},
		{"the longest line", `{"op":"ping","name":"` + strings.Repeat("x", 64-23) + `"}` + "\n", []string{"ping", "eof"}},
	}
	for _, tt := range tests {
		for _, oneByte := range []bool{false, true} {
			t.Run(tt.name, func(t *testing.T) {
				var src io.Reader = strings.NewReader(tt.in)
				if oneByte {
					src = iotest.OneByteReader(src)
				}
				r := NewReader(src)
				r.max = 64
				for _, want := range tt.want {
					req, err := r.ReadRequest()
					switch {
					case want == "bad":
						assert.ErrorAs(t, err, &bad)
					case want == "step":
						assert.ErrorIs(t, err, ErrOutOfStep)
					case want == "eof":
						assert.Equal(t, io.EOF, err)
					case want == "unexpected":
						assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
					case strings.HasPrefix(want, "pw:"):
						require.NoError(t, err)
						assert.Equal(t, want[3:], string(req.Password))
					default:
						require.NoError(t, err)
						assert.Equal(t, want, req.Op)
					}
				}
			})
		}
	}
}

// The bytes of a password that arrived in one read with its line are gone
// from the reader's buffer once the request is read.
func TestReaderWipesPassword(t *testing.T) {
	pw := "correct horse battery staple"
	in := `{"op":"exec","password_len":28}` + "\n" + pw + `{"op":"ping"}` + "\n"
	r := NewReader(strings.NewReader(in))
	req, err := r.ReadRequest()
	require.NoError(t, err)
	assert.Equal(t, pw, string(req.Password))
	require.Greater(t, r.j, len(in)-20, "the whole input was read at once")
	assert.NotContains(t, string(r.buf), "horse")
	req, err = r.ReadRequest()
	require.NoError(t, err)
	assert.Equal(t, "ping", req.Op)
}

// A password announced by a line that is not JSON is read as the next
// line: when that line grows the buffer, the old buffer is wiped.
func TestReaderWipesAnUnreadPassword(t *testing.T) {
	pw := "correct horse battery staple"
	in := `{"op":"exec","password_len":28,}` + "\n" + pw + strings.Repeat("x", 3*readerStart) + "\n"
	r := NewReader(chunkReader{strings.NewReader(in), 4096})
	_, err := r.ReadRequest()
	var bad *RequestError
	require.ErrorAs(t, err, &bad)
	old := r.buf
	require.True(t, bytes.Contains(old, []byte("horse")), "the password waits in the buffer")
	_, err = r.ReadRequest()
	require.ErrorAs(t, err, &bad)
	assert.NotSame(t, &old[0], &r.buf[0], "the buffer grew")
	assert.False(t, bytes.Contains(old, []byte("horse")), "the old buffer is wiped")
	assert.False(t, bytes.Contains(r.buf, []byte("horse")), "the line is wiped")
}

// chunkReader returns at most n bytes per Read.
type chunkReader struct {
	r io.Reader
	n int
}

func (c chunkReader) Read(p []byte) (int, error) { return c.r.Read(p[:min(len(p), c.n)]) }

// FuzzReadRequest compares the Reader, fed in chunks of any size, with a
// plain reading of the whole input.
func FuzzReadRequest(f *testing.F) {
	f.Add([]byte(`{"op":"ping"}`+"\n"), uint8(0))
	f.Add([]byte(`{"op":"exec","password_len":3}`+"\nabc"+`{"op":"ping"}`+"\n"), uint8(1))
	f.Add([]byte(`{"op":"exec","password_len":99999999999999999999}`+"\n"), uint8(7))
	f.Add([]byte(`{"op":"exec","password_len":4097}`+"\n"), uint8(7))
	f.Add([]byte(`{"op":"exec","password_len":-3}`+"\nabc"), uint8(7))
	f.Add([]byte(`{"op":"exec","pass`), uint8(3))
	f.Add([]byte(`{"op":"exec","password_len":8}`+"\nab"), uint8(2))
	f.Add([]byte("nope\n"+`{"op":"ping"}`+"\n"+strings.Repeat("y", 80)), uint8(5))
	f.Fuzz(func(t *testing.T, in []byte, chunk uint8) {
		const max = 64
		r := NewReader(chunkReader{bytes.NewReader(in), int(chunk) + 1})
		r.max = max
		rest := append([]byte{}, in...)
		for step := 0; ; step++ {
			require.Less(t, step, len(in)+2, "the reader makes progress")
			req, err := r.ReadRequest()
			var want *Request
			var wantErr error
			want, wantErr, rest = readPlain(rest, max)
			if wantErr != nil {
				require.Error(t, err)
				var bad *RequestError
				switch {
				case errors.As(wantErr, &bad):
					require.ErrorAs(t, err, &bad)
				default:
					require.ErrorIs(t, err, wantErr)
				}
				if wantErr == io.EOF || wantErr == io.ErrUnexpectedEOF || wantErr == ErrOutOfStep {
					_, again := r.ReadRequest()
					require.Error(t, again, "the reader stays failed")
					return
				}
				continue
			}
			require.NoError(t, err)
			assert.Equal(t, want.Op, req.Op)
			assert.Equal(t, want.Password, req.Password)
			assert.LessOrEqual(t, len(req.Password), MaxPassword)
		}
	})
}

// readPlain reads one request from the start of in as the protocol says,
// and returns it or its error, and what is left.
func readPlain(in []byte, max int) (*Request, error, []byte) {
	if in == nil {
		return nil, ErrOutOfStep, nil
	}
	i := bytes.IndexByte(in, '\n')
	switch {
	case i > max || i < 0 && len(in) > max:
		return nil, &RequestError{"too long"}, nil
	case i < 0 && len(in) == 0:
		return nil, io.EOF, in
	case i < 0:
		return nil, io.ErrUnexpectedEOF, in
	}
	line, rest := in[:i+1], in[i+1:]
	var req Request
	if err := json.Unmarshal(line, &req); err != nil {
		return nil, &RequestError{"malformed"}, rest
	}
	n := req.PasswordLen
	if n < 0 || n > MaxPassword {
		return nil, &RequestError{"length"}, nil
	}
	if len(rest) < n {
		return nil, io.ErrUnexpectedEOF, rest
	}
	if n > 0 {
		req.Password = rest[:n]
	}
	return &req, nil, rest[n:]
}
