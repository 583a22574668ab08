package lean_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/internal/lean"
	"github.com/replhub/replhub/wire"
)

// plainLine is the hub's line for a plain result.
func plainLine(t testing.TB, exit int, text string) []byte {
	var b bytes.Buffer
	require.NoError(t, wire.Write(&b, wire.Reply{V: wire.Version, Plain: &wire.Plain{Exit: exit, Text: text}}))
	return b.Bytes()
}

func TestParsePlain(t *testing.T) {
	for _, text := range []string{"", "Out[1]: 2\n", "<&>\"\\\u2028\U0001F600\x00\x7f\t", "\xff\xed\xa0\x80"} {
		line := plainLine(t, 1, text)
		v, exit, got, ok := lean.ParsePlain(line)
		require.True(t, ok, "%q", line)
		var rep wire.Reply
		require.NoError(t, json.Unmarshal(line, &rep))
		assert.Equal(t, wire.Version, v)
		assert.Equal(t, 1, exit)
		assert.Equal(t, rep.Plain.Text, got)
	}
	for _, line := range []string{
		``, `{}`, `{"v":2,"result":{}}`, `{"v":2,"plain":{"exit":0,"text":"x"}}x`, `{"v":2,"plain":{"exit":0,"text":"x}}`,
		`{"v":2,"plain":{"exit":00,"text":""}}`, `{"v":2,"plain":{"exit":0,"text":"\q"}}`, `{"v":2,"plain":{"exit":0,"text":"` + "\x01" + `"}}`,
		`{"v":2,"plain":{"exit":0,"text":"` + "\xff" + `"}}`, `{"v":2,"plain":{"exit":1234567890,"text":""}}`,
		`{"v":2,"plain":{"exit":0,"text":"\u12"}}`, `{"v":2,"plain":{"exit":0,"text":""}}` + "\n\n",
	} {
		_, _, _, ok := lean.ParsePlain([]byte(line))
		assert.False(t, ok, "%q", line)
	}
	// Surrogates as encoding/json reads them.
	for _, s := range []string{`\ud83d\ude00`, `\ud83d`, `\ude00`, `\ud83dx`, `\ud83d\u0041`, `\ud83d\ud83d\ude00`} {
		line := []byte(`{"v":2,"plain":{"exit":0,"text":"` + s + `"}}`)
		_, _, got, ok := lean.ParsePlain(line)
		require.True(t, ok, s)
		var rep wire.Reply
		require.NoError(t, json.Unmarshal(line, &rep))
		assert.Equal(t, rep.Plain.Text, got, s)
	}
}

// Whatever the text, the hub's line reads back as encoding/json reads it.
func FuzzPlainRoundTrip(f *testing.F) {
	f.Add(0, "Out[1]: 2\n")
	f.Add(4, "\xff<\u2029>\\\"")
	f.Fuzz(func(t *testing.T, exit int, text string) {
		exit %= 1000
		line := plainLine(t, exit, text)
		v, gotExit, got, ok := lean.ParsePlain(line)
		var rep wire.Reply
		require.NoError(t, json.Unmarshal(line, &rep))
		if !ok || v != wire.Version || gotExit != exit || got != rep.Plain.Text {
			t.Fatalf("%q: %v %d %d %q", line, ok, v, gotExit, got)
		}
	})
}

// Whatever the line, what ParsePlain takes encoding/json reads alike.
func FuzzParsePlain(f *testing.F) {
	f.Add([]byte(`{"v":2,"plain":{"exit":0,"text":"a\u00e9\n"}}` + "\n"))
	f.Add([]byte(`{"v":-1,"plain":{"exit":-4,"text":"\ud800\udc00\/"}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		v, exit, text, ok := lean.ParsePlain(line)
		if !ok {
			return
		}
		var rep wire.Reply
		if err := json.Unmarshal(line, &rep); err != nil {
			t.Fatalf("%q: ParsePlain took it, encoding/json: %v", line, err)
		}
		if rep.Plain == nil || rep.V != v || rep.Plain.Exit != exit || rep.Plain.Text != text {
			t.Fatalf("%q: %d %d %q", line, v, exit, text)
		}
	})
}

func TestRuntimeDir(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	dir, xdg := lean.RuntimeDir(env(map[string]string{"XDG_RUNTIME_DIR": "/run/user/7//"}))
	assert.Equal(t, "/run/user/7/replhub", dir)
	assert.True(t, xdg)
	t.Setenv("TMPDIR", "/var/tmp/")
	dir, xdg = lean.RuntimeDir(env(nil))
	assert.Equal(t, filepath.Join("/var/tmp", "replhub-")+itoa(os.Getuid()), dir)
	assert.False(t, xdg)
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// listen listens on a socket of its own for Dial, where it can.
func listen(t *testing.T) (string, net.Listener) {
	if !lean.Supported {
		t.Skip("no lean dial here")
	}
	path := filepath.Join(t.TempDir(), "s")
	ln, err := net.Listen("unix", path)
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	return path, ln
}

// Dial checks its peer, and ReadLine takes lines however they arrive.
func TestDialAndReadLine(t *testing.T) {
	path, ln := listen(t)
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		defer c.Close()
		buf := make([]byte, 64)
		n, _ := c.Read(buf)
		got <- buf[:n]
		for _, part := range []string{"one", "\ntw", "o\nthree\nfour"} {
			c.Write([]byte(part))
		}
	}()
	c, err := lean.Dial(path)
	require.NoError(t, err)
	defer c.Close()
	assert.False(t, c.Readable(10*time.Millisecond), "nothing sent yet")
	assert.False(t, c.Readable(0))
	assert.False(t, c.Readable(-time.Second), "a time gone by waits for nothing")
	require.NoError(t, c.Write([]byte("hello\n")))
	assert.True(t, c.Readable(10*time.Second))
	assert.Equal(t, "hello\n", string(<-got))
	for _, want := range []string{"one\n", "two\n", "three\n"} {
		line, err := c.ReadLine()
		require.NoError(t, err)
		assert.Equal(t, want, string(line))
	}
	_, err = c.ReadLine()
	assert.ErrorIs(t, err, lean.ErrHubClosed, "a last line without its newline")

	_, err = lean.Dial(filepath.Join(t.TempDir(), "none"))
	assert.Error(t, err)
}

func TestCodeTooBigSaysMaxLine(t *testing.T) {
	assert.Contains(t, lean.CodeTooBig, " "+itoa(lean.MaxLine>>20)+" MiB")
}

func TestIsNeedEnv(t *testing.T) {
	for code, want := range map[string]bool{wire.CodeNeedEnv: true, wire.CodeNeedPassword: false, wire.CodeBusy: false} {
		var b bytes.Buffer
		require.NoError(t, wire.Write(&b, wire.Reply{V: wire.Version, Err: &wire.Error{Code: code, Message: "m"}}))
		assert.Equal(t, want, lean.IsNeedEnv(b.Bytes()), code)
	}
	assert.False(t, lean.IsNeedEnv(plainLine(t, 0, `"err":{"code":"need_env",`)))
	assert.False(t, lean.IsNeedEnv(nil))
}

// A line over MaxLine is refused, one of MaxLine taken.
func TestReadLineBound(t *testing.T) {
	path, ln := listen(t)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		line := bytes.Repeat([]byte("x"), lean.MaxLine)
		line[len(line)-1] = '\n'
		c.Write(line)
		c.Write(append(line[:len(line)-1], 'x', '\n'))
	}()
	c, err := lean.Dial(path)
	require.NoError(t, err)
	defer c.Close()
	line, err := c.ReadLine()
	require.NoError(t, err)
	assert.Len(t, line, lean.MaxLine)
	_, err = c.ReadLine()
	assert.ErrorIs(t, err, lean.ErrLineTooLong)
}

// A first Ctrl-C says the note and interrupts, a second calls again; stop
// may be called twice.
func TestCtrlC(t *testing.T) {
	var errw bytes.Buffer
	interrupted, again := make(chan struct{}), make(chan struct{})
	stop := lean.CtrlC("[note]", &errw, func() { close(interrupted) }, func() { close(again) }, nil)
	defer stop()
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGINT))
	select {
	case <-interrupted:
	case <-time.After(10 * time.Second):
		t.Fatal("a first Ctrl-C did not interrupt")
	}
	assert.Equal(t, "[note]\n", errw.String())
	select {
	case <-again:
		t.Fatal("one Ctrl-C called again")
	case <-time.After(50 * time.Millisecond):
	}
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGINT))
	select {
	case <-again:
	case <-time.After(10 * time.Second):
		t.Fatal("a second Ctrl-C did not call again")
	}
	stop()

	// Once done is closed, a Ctrl-C does nothing (and ends nothing).
	errw.Reset()
	done := make(chan struct{})
	stop = lean.CtrlC("[note]", &errw, func() { t.Error("interrupted after done") }, func() { t.Error("again after done") }, done)
	defer stop()
	close(done)
	time.Sleep(20 * time.Millisecond)
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGINT))
	time.Sleep(100 * time.Millisecond)
	assert.Empty(t, errw.String())
}

// replyLine is the hub's line for rep.
func replyLine(t testing.TB, rep wire.Reply) []byte {
	var b bytes.Buffer
	rep.V = wire.Version
	require.NoError(t, wire.Write(&b, rep))
	return b.Bytes()
}

func TestParseEvent(t *testing.T) {
	for _, ev := range []wire.Event{
		{Kind: wire.EventOut, Text: "tick 1\n"}, {Kind: wire.EventOut}, {Kind: wire.EventOut, Text: "<&>\"\\\u2028\U0001F600\x00\xff"},
		{Kind: wire.EventCell, Cell: 12, Code: "1+1", By: "the agent", Mine: true},
	} {
		v, kind, text, ok := lean.ParseEvent(replyLine(t, wire.Reply{Event: &ev}))
		require.True(t, ok, "%+v", ev)
		assert.Equal(t, wire.Version, v)
		assert.Equal(t, ev.Kind, kind)
		assert.Equal(t, strings.ToValidUTF8(ev.Text, "\ufffd"), text)
	}
	for _, line := range []string{
		``, `{"v":2,"event":{"kind":"out","text":"x"}}x`, `{"v":2, "event":{"kind":"out"}}`, `{"v":2,"event":{"kind":"out","text":1}}`,
		`{"v":2,"event":{"Kind":"out"}}`, `{"v":2,"event":{"kind":"out","cell":"1"}}`, `{"v":2,"event":{"kind":"out","cell":1.5}}`,
		`{"v":2,"event":{"kind":"done","result":{}}}`, `{"v":2,"event":{"kind":"out","mine":1}}`, `{"v":2,"event":{"kind":"out",}}`,
		`{"v":2,"event":{"kind":"out"}` + "\n", `{"v":2,"event":{"kind":"out","text":null}}`, `{"v":2,"progress":{"session":"s"}}`,
		`{"v":2,"event":{"kind":"out","text":"x","result":1}}`, `{"v":2,"event":{"kind":"out","info":"s"}}`,
	} {
		_, _, _, ok := lean.ParseEvent([]byte(line))
		assert.False(t, ok, "%q", line)
	}
}

func TestParseProgress(t *testing.T) {
	for _, p := range []wire.Progress{
		{Session: "probe", Hosts: 40, Done: 12, Failed: 1, ElapsedMS: 1 << 40}, {Session: "s", Cell: 3, OutputChars: 7},
		{Session: "s", Hosts: math.MinInt, Done: math.MaxInt, ElapsedMS: math.MinInt64},
	} {
		v, got, ok := lean.ParseProgress(replyLine(t, wire.Reply{Progress: &p}))
		require.True(t, ok, "%+v", p)
		assert.Equal(t, wire.Version, v)
		assert.Equal(t, lean.Progress{Session: p.Session, Hosts: p.Hosts, Done: p.Done, Failed: p.Failed}, got)
	}
	for _, line := range []string{
		`{"v":2,"progress":{"session":1}}`, `{"v":2,"progress":{"hosts":"4"}}`, `{"v":2,"progress":{"done":1e2}}`,
		`{"v":2,"progress":{"elapsed_ms":12345678901234567890}}`, `{"v":2,"event":{"kind":"out"}}`, `{"v":2,"progress":{"cell":-01}}`,
	} {
		_, _, ok := lean.ParseProgress([]byte(line))
		assert.False(t, ok, "%q", line)
	}
}

// Whatever the text, the hub's line for an out event reads back as
// encoding/json reads it.
func FuzzEventRoundTrip(f *testing.F) {
	f.Add("tick 1\n", 0)
	f.Add("\xff<\u2029>\\\"", 7)
	f.Fuzz(func(t *testing.T, text string, cell int) {
		line := replyLine(t, wire.Reply{Event: &wire.Event{Kind: wire.EventOut, Cell: cell, Text: text}})
		v, kind, got, ok := lean.ParseEvent(line)
		var rep wire.Reply
		require.NoError(t, json.Unmarshal(line, &rep))
		if !ok || v != wire.Version || kind != wire.EventOut || got != rep.Event.Text {
			t.Fatalf("%q: %v %d %q %q", line, ok, v, kind, got)
		}
	})
}

// Whatever the line, what ParseEvent and ParseProgress take encoding/json
// reads alike.
func FuzzParseNews(f *testing.F) {
	f.Add([]byte(`{"v":2,"event":{"kind":"out","text":"a\u00e9\n","mine":true}}` + "\n"))
	f.Add([]byte(`{"v":2,"progress":{"session":"p","cell":0,"elapsed_ms":12,"output_chars":0,"hosts":3,"done":1}}`))
	f.Add([]byte(`{"v":-1,"event":{"kind":"\ud800\udc00","zz":-0,"cell":1,"cell":2}}`))
	f.Add([]byte(`{"v":2,"event":{"kind":"out","text":"x","result":true,"info":1}}`))
	f.Add([]byte(`{"v":2,"progress":{"hosts":9223372036854775807,"done":-9223372036854775808}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		if v, kind, text, ok := lean.ParseEvent(line); ok {
			var rep wire.Reply
			if err := json.Unmarshal(line, &rep); err != nil {
				t.Fatalf("%q: ParseEvent took it, encoding/json: %v", line, err)
			}
			if rep.Event == nil || rep.V != v || rep.Event.Kind != kind || rep.Event.Text != text {
				t.Fatalf("%q: %d %q %q", line, v, kind, text)
			}
		}
		if v, p, ok := lean.ParseProgress(line); ok {
			var rep wire.Reply
			if err := json.Unmarshal(line, &rep); err != nil {
				t.Fatalf("%q: ParseProgress took it, encoding/json: %v", line, err)
			}
			q := rep.Progress
			if q == nil || rep.V != v || (lean.Progress{Session: q.Session, Hosts: q.Hosts, Done: q.Done, Failed: q.Failed}) != p {
				t.Fatalf("%q: %d %+v", line, v, p)
			}
		}
	})
}

// A terminal's screen: output as it comes, its open line ended before more
// text, and a group's progress drawn on one line and wiped.
func TestScreen(t *testing.T) {
	var out, errb bytes.Buffer
	s := &lean.Screen{Out: &out, Err: &errb}
	s.Progress(lean.Progress{Session: "s"})
	s.Progress(lean.Progress{Session: "ünï", Hosts: 40, Done: 12, Failed: 1})
	assert.Equal(t, fmt.Sprintf("\r%-60s", "ünï: 12/40 done, 1 failed"), errb.String())
	s.Output("")
	s.Output("tick")
	clear := "\r" + strings.Repeat(" ", 60) + "\r"
	assert.Equal(t, fmt.Sprintf("\r%-60s", "ünï: 12/40 done, 1 failed")+clear, errb.String(), "output wipes the progress line")
	s.EndLine(false)
	assert.Equal(t, "tick", out.String(), "no more text: the line stays open")
	s.EndLine(true)
	s.EndLine(true)
	assert.Equal(t, "tick\n", out.String())
	s.Output("a\nb\n")
	s.EndLine(true)
	assert.Equal(t, "tick\na\nb\n", out.String())
	errb.Reset()
	s.Progress(lean.Progress{Session: "s", Hosts: 2, Done: 1})
	s.Progress(lean.Progress{Session: "s", Hosts: 2, Done: 2})
	s.ClearProgress()
	assert.Equal(t, fmt.Sprintf("\r%-60s", "s: 1/2 done")+clear, errb.String(), "wiped once, when all are done")
	var none *lean.Screen
	none.EndLine(true)

	// Closed (a second Ctrl-C): the line is wiped, and nothing more shows.
	out.Reset()
	errb.Reset()
	s.Progress(lean.Progress{Session: "s", Hosts: 2, Done: 1})
	s.Close()
	s.Progress(lean.Progress{Session: "s", Hosts: 2, Done: 1})
	s.Output("late\n")
	assert.Equal(t, fmt.Sprintf("\r%-60s", "s: 1/2 done")+clear, errb.String())
	assert.Empty(t, out.String())

	// A note of the command's own (a Ctrl-C's) and Close's end give
	// themselves a line: the progress wiped, an open line ended.
	for _, end := range []func(s *lean.Screen){
		func(s *lean.Screen) { io.WriteString(s.Notes(), "[note]\n") },
		func(s *lean.Screen) { s.Close() },
	} {
		out.Reset()
		errb.Reset()
		s = &lean.Screen{Out: &out, Err: &errb}
		s.Output("tick")
		s.Progress(lean.Progress{Session: "s", Hosts: 2, Done: 1})
		end(s)
		assert.Equal(t, "tick\n", out.String())
		assert.True(t, strings.HasPrefix(errb.String(), fmt.Sprintf("\r%-60s", "s: 1/2 done")+clear), "%q", errb.String())
	}
	assert.Equal(t, fmt.Sprintf("\r%-60s", "s: 1/2 done")+clear, errb.String())
}

// A run's name is "run-" and the 16 hex digits of 8 bytes, as
// encoding/hex writes them; a source that gives fewer fails it.
func TestRunName(t *testing.T) {
	b := []byte{0x00, 0x1f, 0xa0, 0xff, 0x12, 0x34, 0xab, 0xcd}
	name, err := lean.RunName(bytes.NewReader(b))
	require.NoError(t, err)
	assert.Equal(t, "run-001fa0ff1234abcd", name)
	_, err = lean.RunName(bytes.NewReader(b[:7]))
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
}

// Code on stdin that is not UTF-8 is refused, naming the first bad byte:
// sent on, each bad byte would become U+FFFD and run.
func TestReadCodeWantsUTF8(t *testing.T) {
	code, err := lean.ReadCode(strings.NewReader("print('café')\n"))
	require.NoError(t, err)
	assert.Equal(t, "print('café')\n", code)
	_, err = lean.ReadCode(strings.NewReader("x = 1\nprint('caf\xe9')\n"))
	require.Error(t, err)
	assert.Equal(t, "the code on stdin is not UTF-8 text (byte 17 is not): convert it first, e.g. iconv -f latin1 -t utf-8", err.Error())
	_, err = lean.ReadCode(strings.NewReader("\xff"))
	assert.ErrorContains(t, err, "(byte 1 is not)")
}
