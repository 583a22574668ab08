package hub

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadFrame(t *testing.T) {
	in := `{"op":"ready","proto":1,"python":"3.11.7","pid":7}` + "\n" +
		"garbage\n" +
		`{"op":"blob","len":5}` + "\n" + "ab\ncd" +
		`{"no":"op"}` + "\n" +
		`{"op":"done","cell":3,"status":"ok","value":"1","error":{"type":"E","message":"m","traceback":"t"}}` + "\n"
	r := bufio.NewReader(strings.NewReader(in))
	f, err := readFrame(r)
	require.NoError(t, err)
	assert.Equal(t, "ready", f.Op)
	assert.Equal(t, "3.11.7", f.Python)

	_, err = readFrame(r)
	var mf *malformedError
	require.True(t, errors.As(err, &mf))
	assert.Contains(t, mf.Error(), "garbage")

	f, err = readFrame(r)
	require.NoError(t, err)
	assert.Equal(t, []byte("ab\ncd"), f.data)

	_, err = readFrame(r)
	require.True(t, errors.As(err, &mf))
	assert.Contains(t, mf.Error(), "no op")

	f, err = readFrame(r)
	require.NoError(t, err)
	assert.Equal(t, "E", f.cellError().Type)

	_, err = readFrame(r)
	assert.Equal(t, io.EOF, err)
}

func TestReadFrameBrokenStream(t *testing.T) {
	r := bufio.NewReader(io.MultiReader(bytes.NewReader(bytes.Repeat([]byte("x"), maxFrameHeader+10)), strings.NewReader("\n")))
	_, err := readFrame(r)
	assert.ErrorIs(t, err, errBrokenStream)
}

func TestReadFrameTruncatedPayloadIsEOF(t *testing.T) {
	r := bufio.NewReader(strings.NewReader(`{"op":"blob","len":10}` + "\nabc"))
	_, err := readFrame(r)
	assert.Equal(t, io.EOF, err)
}

func FuzzReadFrame(f *testing.F) {
	f.Add([]byte(`{"op":"done","cell":1}` + "\n"))
	f.Add([]byte(`{"op":"x","len":3}` + "\nabc"))
	f.Add([]byte("\xff\xfe\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bufio.NewReader(bytes.NewReader(b))
		for i := 0; i < 100; i++ {
			if _, err := readFrame(r); err != nil {
				var mf *malformedError
				if errors.As(err, &mf) {
					continue
				}
				return
			}
		}
	})
}

func TestCheckName(t *testing.T) {
	for _, ok := range []string{"a", "chirp", "A.b-c_9", strings.Repeat("x", 64)} {
		assert.NoError(t, checkName(ok), ok)
	}
	for _, bad := range []string{"", ".", "..", "a b", "a/b", strings.Repeat("x", 65), "é", "a\n"} {
		assert.Error(t, checkName(bad), bad)
	}
}

func TestLookPath(t *testing.T) {
	dir := t.TempDir()
	p, err := lookPath("sh", "/nonexistent:"+dir+":/bin:/usr/bin")
	require.NoError(t, err)
	assert.True(t, strings.HasSuffix(p, "/sh"))
	_, err = lookPath("no-such-binary-here", dir)
	assert.Error(t, err)
	_, err = lookPath(dir, "")
	assert.EqualError(t, err, "not an executable file")
}

// writeFrame sends a small payload in the header's write and a big one in a
// write of its own; either way the frame reads back whole.
func TestWriteFrameRoundTrip(t *testing.T) {
	for _, size := range []int{0, 5, 64 << 10, 64<<10 + 1, 3 << 20} {
		data := bytes.Repeat([]byte{'a', '\n', 0}, size/3+1)[:size]
		var w countingWriter
		require.NoError(t, writeFrame(&w, map[string]any{"op": "chunk", "seq": 1}, data))
		if size > 64<<10 {
			assert.Equal(t, 2, w.writes, "size %d", size)
		} else {
			assert.Equal(t, 1, w.writes, "size %d", size)
		}
		f, err := readFrame(bufio.NewReader(&w.buf))
		require.NoError(t, err)
		assert.Equal(t, "chunk", f.Op)
		assert.Equal(t, len(data), len(f.data))
		assert.True(t, bytes.Equal(data, f.data), "size %d", size)
	}
}

type countingWriter struct {
	buf    bytes.Buffer
	writes int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes++
	return w.buf.Write(p)
}
