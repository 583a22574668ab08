package proto

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type goldenFrame struct {
	From  string          `json:"from"`
	Frame json.RawMessage `json:"frame"`
	Data  string          `json:"data"`
}

func loadGolden(t *testing.T) []goldenFrame {
	t.Helper()
	b, err := os.ReadFile("testdata/golden.json")
	require.NoError(t, err)
	var g []goldenFrame
	require.NoError(t, json.Unmarshal(b, &g))
	return g
}

func asMap(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	return m
}

// Every frame of the golden file reads into its Go type with no key left
// over, and writes back as the same JSON: the Go types and the golden
// agree key for key.
func TestGoldenRoundTrip(t *testing.T) {
	seen := map[string]bool{}
	for i, g := range loadGolden(t) {
		t.Run(fmt.Sprintf("%d-%s", i, g.From), func(t *testing.T) {
			ops := fromWorker
			if g.From == "hub" {
				ops = fromHub
			}
			in := append(append([]byte(nil), g.Frame...), '\n')
			in = append(in, g.Data...)
			r := newReader(bytes.NewReader(in), ops)
			m, err := r.Read()
			require.NoError(t, err)
			seen[g.From+" "+m.Op()] = true
			assert.Equal(t, g.Data, string(Data(m)))
			var out bytes.Buffer
			require.NoError(t, NewWriter(&out).Write(m))
			line, rest, _ := bytes.Cut(out.Bytes(), []byte("\n"))
			assert.Equal(t, asMap(t, g.Frame), asMap(t, line))
			assert.Equal(t, g.Data, string(rest))
		})
	}
	// Every op each side sends has a golden frame.
	for op := range fromWorker {
		assert.True(t, seen["worker "+op], "no golden frame of %q from the worker", op)
	}
	for op := range fromHub {
		assert.True(t, seen["hub "+op], "no golden frame of %q from the hub", op)
	}
}

func readAll(t *testing.T, in string) (msgs []Msg, errs []error) {
	t.Helper()
	r := NewReader(strings.NewReader(in))
	for i := 0; i < 100; i++ {
		m, err := r.Read()
		if err != nil {
			errs = append(errs, err)
			var mf *Malformed
			if errors.As(err, &mf) {
				continue
			}
			return
		}
		msgs = append(msgs, m)
	}
	t.Fatal("the reader did not end")
	return
}

func TestReaderDropsMalformedLinesAndStaysInStep(t *testing.T) {
	in := "this is not a frame\n" +
		`{"no":"op"}` + "\n" +
		`{"op":"blob","len":5}` + "\nab\ncd" +
		`{"op":"done","cell":1,"statuss":"ok"}` + "\n" +
		`{"op":"done","cell":"one"}` + "\n" +
		`{"op":"exec","cell":1,"code":"","fence":""}` + "\n" +
		`[1,2]` + "\n" +
		`{"op":"pong","id":3}` + "\n"
	msgs, errs := readAll(t, in)
	require.Len(t, msgs, 1)
	assert.Equal(t, &Pong{Head{O: "pong"}, 3}, msgs[0])
	require.Len(t, errs, 8)
	for _, e := range errs[:7] {
		var mf *Malformed
		assert.True(t, errors.As(e, &mf), "%v", e)
	}
	assert.Contains(t, errs[2].Error(), `unknown op "blob"`)
	assert.Contains(t, errs[3].Error(), "statuss")
	assert.Contains(t, errs[5].Error(), `unknown op "exec"`, "the hub's own ops are not the worker's")
	assert.Equal(t, io.EOF, errs[7])
}

func TestReaderViolations(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"op":"pong","len":68719476736}` + "\n", "a pong frame with a payload"},
		{`{"op":"pong","len":4611686018427387904}` + "\n", "a pong frame with a payload"},
		{`{"op":"chunk","seq":0,"len":8388609}` + "\n", "over its bound of 8388608"},
		{`{"op":"req","id":1,"kind":"put","py":"3.1","len":1073741825}` + "\n", "over its bound"},
		{`{"op":"served","sid":1,"py":"3.1","ok":true,"len":1073741825}` + "\n", "over its bound"},
		{`{"op":"done","cell":1,"len":-1}` + "\n", "bad len"},
		{`{"op":"done","cell":1,"len":1e3}` + "\n", "bad len"},
		{`{"op":"done","cell":1,"len":"3"}` + "\n", "bad len"},
		{`{"op":"nope","len":9000000}` + "\n", "with a payload of 9000000"},
		{strings.Repeat("x", MaxHeader+1) + "\n", "a frame header over"},
	} {
		r := NewReader(strings.NewReader(c.in))
		_, err := r.Read()
		var v *Violation
		require.True(t, errors.As(err, &v), "%.60s: %v", c.in, err)
		assert.Contains(t, v.Error(), c.want)
	}
}

func TestReaderMaxBlob(t *testing.T) {
	r := NewReader(strings.NewReader(`{"op":"req","id":1,"kind":"put","py":"3.1","len":11}` + "\n"))
	r.MaxBlob = 10
	_, err := r.Read()
	var v *Violation
	assert.True(t, errors.As(err, &v), "%v", err)
}

// A payload cut short by the end of the stream is the end, not a frame.
func TestReaderTruncatedIsEOF(t *testing.T) {
	for _, in := range []string{
		`{"op":"chunk","seq":0,"len":10}` + "\nabc",
		`{"op":"req","id":1,"kind":"put","py":"3.1","len":40000000}` + "\nabc",
		`{"op":"pong","id":3`,
	} {
		_, err := NewReader(strings.NewReader(in)).Read()
		assert.Equal(t, io.EOF, err, "%.40s", in)
	}
}

// A blob bigger than one growth step reads whole.
func TestReaderBigBlob(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), (40<<20)/16+3)
	in := fmt.Sprintf(`{"op":"served","sid":1,"py":"3.1","ok":true,"len":%d}`+"\n", len(data))
	m, err := NewReader(io.MultiReader(strings.NewReader(in), bytes.NewReader(data))).Read()
	require.NoError(t, err)
	assert.True(t, bytes.Equal(data, Data(m)))
}

// A frame half sent, then nothing: Stalled grows; between frames, and
// while the reader is not waiting, it stays zero.
func TestReaderStalled(t *testing.T) {
	pr, pw := io.Pipe()
	r := NewReader(pr)
	got := make(chan error, 1)
	go func() {
		_, err := r.Read()
		got <- err
	}()
	time.Sleep(50 * time.Millisecond)
	assert.Zero(t, r.Stalled(), "waiting for a frame is not a stall")
	pw.Write([]byte(`{"op":"pong",`))
	deadline := time.Now().Add(5 * time.Second)
	for r.Stalled() < 100*time.Millisecond && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	assert.GreaterOrEqual(t, r.Stalled(), 100*time.Millisecond)
	pw.Write([]byte(`"id":1}` + "\n"))
	require.NoError(t, <-got)
	assert.Zero(t, r.Stalled())
	pw.Close()
}

func TestWriterOneWriteForSmallPayloads(t *testing.T) {
	for _, size := range []int{0, 5, 64 << 10, 64<<10 + 1, 3 << 20} {
		data := bytes.Repeat([]byte{'a', '\n', 0}, size/3+1)[:size]
		var w countingWriter
		require.NoError(t, NewWriter(&w).Write(&Chunk{Sid: 1, Seq: 1, Data: data}))
		want := 1
		if size > 64<<10 {
			want = 1 + (size+writePiece-1)/writePiece // the payload in pieces
		}
		assert.Equal(t, want, w.writes, "size %d", size)
		m, err := newReader(&w.buf, fromHub).Read()
		require.NoError(t, err)
		assert.True(t, bytes.Equal(data, Data(m)), "size %d", size)
	}
}

// A big cell's frame, written piece by piece, is the frame Encode makes.
func TestWriterBigExec(t *testing.T) {
	code := strings.Repeat("héllo \"wörld\" \\ \x00\xff\u2028 <&> 🎉\n", 20000)
	for _, c := range []string{code, code[:len(code)-1], code[1:]} {
		var out bytes.Buffer
		m := &Exec{Cell: 7, Code: c, Fence: "\x1efence\x1f"}
		require.NoError(t, NewWriter(&out).Write(m))
		want, err := Encode(&Exec{Cell: 7, Code: c, Fence: "\x1efence\x1f"})
		require.NoError(t, err)
		assert.Equal(t, asMap(t, want), asMap(t, out.Bytes()))
		var got Exec
		require.NoError(t, json.Unmarshal(out.Bytes(), &got))
		assert.Equal(t, strings.ToValidUTF8(c, "\ufffd"), got.Code)
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

// FuzzReader feeds the reader arbitrary bytes: it never panics, never
// allocates past its bounds (a huge len is a violation before any
// allocation), and always ends.
func FuzzReader(f *testing.F) {
	b, err := os.ReadFile("testdata/golden.json")
	if err != nil {
		f.Fatal(err)
	}
	var g []goldenFrame
	if err := json.Unmarshal(b, &g); err != nil {
		f.Fatal(err)
	}
	for _, x := range g {
		if x.From == "worker" {
			f.Add(append(append(append([]byte(nil), x.Frame...), '\n'), x.Data...))
		}
	}
	f.Add([]byte(`{"op":"pong","len":68719476736}` + "\n"))
	f.Add([]byte(`{"op":"x","len":3}` + "\nabc"))
	f.Add([]byte("\xff\xfe\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := NewReader(bytes.NewReader(b))
		r.MaxBlob = 1 << 20
		for i := 0; i < 1000; i++ {
			m, err := r.Read()
			if err != nil {
				var mf *Malformed
				if errors.As(err, &mf) {
					continue
				}
				return
			}
			if int64(len(Data(m))) != m.head().Len {
				t.Fatalf("payload of %d bytes for len %d", len(Data(m)), m.head().Len)
			}
		}
	})
}

// An answer is decoded strictly down to its nested parts: a misspelt key
// in an inspection is a malformed frame, dropped; an answer with a
// payload breaks the protocol.
func TestAnswerStrict(t *testing.T) {
	msgs, errs := readAll(t, `{"op":"answer","id":1,"ok":true,"inspect":{"expr":"x","type":"int","kind":"object","repr":"1","lenn":1}}`+"\n"+
		`{"op":"answer","id":3,"ok":false,"busy":true,"cell":4}`+"\n")
	require.Len(t, msgs, 1)
	assert.Equal(t, &Answer{Head: Head{O: OpAnswer}, ID: 3, Busy: true, Cell: 4}, msgs[0])
	require.Len(t, errs, 2)
	assert.Contains(t, errs[0].Error(), "lenn")
	_, err := NewReader(strings.NewReader(`{"op":"answer","id":2,"ok":true,"len":3}` + "\nabc")).Read()
	var v *Violation
	assert.True(t, errors.As(err, &v), "%v", err)
}

func TestPrefixAtEnd(t *testing.T) {
	fence := []byte("<<FENCE>>")
	assert.Equal(t, 0, PrefixAtEnd([]byte("abc"), fence))
	assert.Equal(t, 2, PrefixAtEnd([]byte("abc<<"), fence))
	assert.Equal(t, 8, PrefixAtEnd([]byte("<<FENCE>"), fence))
	assert.Equal(t, 1, PrefixAtEnd([]byte("<"), fence))
}

// The splitter drops whole markers, keeps what only looks like one, and
// at the end drops a marker's torn head but not a lone "\x1e".
func TestSplitter(t *testing.T) {
	out, errm := StreamMarkers("aabbccdd")
	var got []string
	emit := func(stdout bool, b []byte) {
		tag := "E:"
		if stdout {
			tag = "O:"
		}
		got = append(got, tag+string(b))
	}
	d := NewSplitter("aabbccdd")
	d.Split([]byte("a"+string(out)+"b\x1e\x1faabbccdd3\x1f\x1e"+string(errm)+"c"), emit)
	d.Split(out[:5], emit)
	d.Flush(emit)
	assert.Equal(t, []string{"E:a", "O:b\x1e", "O:\x1faabbccdd3\x1f\x1e", "E:c"}, got)
	got = nil
	d.Split([]byte("x\x1e"), emit)
	d.Flush(emit)
	assert.Equal(t, []string{"E:x", "E:\x1e"}, got)
	assert.True(t, ValidStreamsToken(NewStreamsToken()))
	assert.False(t, ValidStreamsToken("xyz"))
}

// FuzzReaderOnePass holds the one-pass decode of a usual frame to the
// full path's verdict: a line read as it is, and with a leading blank
// (which only the full path takes), gives the same frame or the same kind
// of error, and the stream after it stays in step alike.
func FuzzReaderOnePass(f *testing.F) {
	f.Add([]byte(`{"op":"done","cell":1,"status":"ok","value":"1","duration":0.1}`), []byte(nil))
	f.Add([]byte(`{"op":"out","len":3}`), []byte("abc"))
	f.Add([]byte(`{"op":"out","len":3,"op":"pong"}`), []byte("abc"))
	f.Add([]byte(`{"op":"pong","len":-1}`), []byte(nil))
	f.Add([]byte(`{"op":"pong"} {}`), []byte(nil))
	f.Add([]byte(`{"op":"done","cell":1,"bogus":2}`), []byte(nil))
	f.Add([]byte(`{"op":"out","len":2.0}`), []byte("ab"))
	f.Add([]byte(`{"op":"pong","op":null}`), []byte(nil))
	f.Add([]byte("{\"op\":\"pong\"}\v"), []byte(nil))
	f.Fuzz(onePassSame)
}

// onePassSame is FuzzReaderOnePass's check of one line and the bytes
// after it.
func onePassSame(t *testing.T, line, data []byte) {
	if bytes.IndexByte(line, '\n') >= 0 {
		return
	}
	read := func(l []byte) (msgs []Msg, kinds []string) {
		in := append(append(append(append([]byte(nil), l...), '\n'), data...), `{"op":"pong"}`+"\n"...)
		r := NewReader(bytes.NewReader(in))
		r.MaxBlob = 1 << 10
		for i := 0; i < 3; i++ {
			m, err := r.Read()
			var mf *Malformed
			var v *Violation
			switch {
			case err == nil:
				kinds = append(kinds, "frame")
			case errors.As(err, &mf):
				kinds = append(kinds, "malformed")
			case errors.As(err, &v):
				kinds = append(kinds, "violation")
			default:
				kinds = append(kinds, "end")
			}
			msgs = append(msgs, m)
			if err != nil && mf == nil {
				break
			}
		}
		return msgs, kinds
	}
	m1, k1 := read(line)
	m2, k2 := read(append([]byte(" "), line...))
	require.Equal(t, k2, k1)
	require.Equal(t, m2, m1)
}

// A line that ends in a blank JSON does not allow (\v, \f, U+0085, U+00A0)
// or gives op or len a null after a value is the full path's to judge:
// the one-pass decode took the first as a frame and kept the earlier op or
// len through the second. The full path's frame has the len it read.
func TestReaderOnePassStrictEnd(t *testing.T) {
	for _, l := range []string{
		"{\"op\":\"pong\"}\v", "{\"op\":\"pong\"}\f", "{\"op\":\"pong\"}\u0085", "{\"op\":\"pong\"}\u00a0",
		`{"op":"pong","op":null}`, `{"op":"out","len":2,"Op" : null}`, `{"op":"out","len":2,"\u006fp":null}`,
		`{"op":"out","len":2,"len":null}`, `{"op":"out","len":2,"LEN":null}`,
	} {
		t.Run(l, func(t *testing.T) { onePassSame(t, []byte(l), []byte("ab")) })
		r := NewReader(strings.NewReader(" " + l + "\nab"))
		if m, err := r.Read(); err == nil {
			assert.Equal(t, int64(len(Data(m))), m.head().Len, l)
		}
	}
}

// A chunk buffer given back is the next one taken, whichever goroutine
// takes it (a transfer's reader moves between threads); at most
// keepChunks are kept, and none once dropped for idleness.
func TestChunkBuffersAreShared(t *testing.T) {
	dropChunks()
	a := GetChunk(ChunkSize)
	first := &a[0]
	PutChunk(a)
	got := make(chan *byte)
	go func() {
		b := GetChunk(2 << 20)
		got <- &b[0]
		PutChunk(b)
	}()
	assert.Same(t, first, <-got, "taken by another goroutine")

	small := GetChunk(4096)
	assert.Len(t, small, 4096)
	PutChunk(small) // not a chunk's: left to the GC
	var held [][]byte
	for range keepChunks + 3 {
		held = append(held, GetChunk(ChunkSize))
	}
	for _, b := range held {
		PutChunk(b)
	}
	chunks.mu.Lock()
	assert.Len(t, chunks.free, keepChunks)
	chunks.mu.Unlock()
	dropChunks()
	chunks.mu.Lock()
	assert.Empty(t, chunks.free)
	chunks.mu.Unlock()
}
