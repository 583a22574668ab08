package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/client"
	"github.com/replhub/replhub/config"
)

// stdio runs Serve on pipes, as `replhub mcp` runs it on its stdin and
// stdout, with no hub.
type stdio struct {
	t       *testing.T
	in      *io.PipeWriter
	replies chan map[string]any
	done    chan error
}

func serveStdio(t *testing.T) *stdio {
	dir := t.TempDir()
	p, err := config.FromEnv(func(k string) string {
		return map[string]string{"XDG_RUNTIME_DIR": dir, "XDG_CONFIG_HOME": dir, "HOME": dir}[k]
	})
	require.NoError(t, err)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	s := &stdio{t: t, in: inW, replies: make(chan map[string]any, 16), done: make(chan error, 1)}
	go func() {
		err := Serve(context.Background(), &client.Client{Paths: p}, "test", inR, outW)
		outW.Close()
		s.done <- err
	}()
	go func() {
		defer close(s.replies)
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m map[string]any
			if !assert.NoError(t, json.Unmarshal(sc.Bytes(), &m), "a reply that is no JSON: %q", sc.Text()) {
				return
			}
			s.replies <- m
		}
	}()
	t.Cleanup(func() {
		inW.Close()
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			t.Error("the server did not end at the end of its input")
		}
	})
	return s
}

func (s *stdio) send(line string) {
	s.t.Helper()
	_, err := io.WriteString(s.in, line)
	require.NoError(s.t, err)
}

func (s *stdio) reply() map[string]any {
	s.t.Helper()
	select {
	case m, ok := <-s.replies:
		require.True(s.t, ok, "the server's output ended")
		return m
	case <-time.After(10 * time.Second):
		s.t.Fatal("no reply")
		return nil
	}
}

// call sends a request and returns its result.
func (s *stdio) call(id int, method, params string) map[string]any {
	s.t.Helper()
	s.send(`{"jsonrpc":"2.0","id":` + jsonNumber(id) + `,"method":"` + method + `","params":` + params + "}\n")
	m := s.reply()
	require.EqualValues(s.t, id, m["id"], "%v", m)
	require.Contains(s.t, m, "result", "%v", m)
	return m["result"].(map[string]any)
}

func jsonNumber(n int) string { b, _ := json.Marshal(n); return string(b) }

// The server answers every line that is no message with JSON-RPC's error
// for it and serves the next request: the client's mistake does not end it.
func TestMCPServerOutlivesBadLines(t *testing.T) {
	s := serveStdio(t)
	s.call(1, "initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`)
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")

	long := `{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"exec","arguments":{"name":"x","code":"` +
		strings.Repeat("a", 20<<20) + `"}}}`
	// As the TypeScript SDK writes a request: its id last.
	longLast := `{"method":"tools/call","params":{"name":"exec","arguments":{"name":"x","code":"` +
		strings.Repeat("a", 20<<20) + `"}},"jsonrpc":"2.0","id":98}`
	ping := `{"jsonrpc":"2.0","id":2,"method":"ping"}`
	for _, c := range []struct {
		name, line string
		code       float64
		id         any
	}{
		{"an id of no valid type", `{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, -32600, nil},
		{"no JSON", `not json`, -32700, nil},
		{"an empty object", `{}`, -32600, nil},
		{"an empty batch", `[]`, -32600, nil},
		{"a batch", `[` + ping + `]`, -32600, nil},
		{"a string", `"x"`, -32600, nil},
		{"no jsonrpc member", `{"id":7,"method":"ping"}`, -32600, 7.0},
		{"a method of no valid type", `{"jsonrpc":"2.0","id":"s","method":3}`, -32600, "s"},
		{"two messages on one line", ping + ping, -32700, nil},
		{"a cut message", `{"jsonrpc":"2.0","id":3,"meth`, -32700, nil},
		{"a line over the bound", long, -32600, 99.0},
		{"a line over the bound, its id last", longLast, -32600, 98.0},
		{"a line over the bound, no id", strings.Replace(long, `"id":99,`, "", 1), -32600, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			s.t = t
			s.send(c.line + "\n")
			m := s.reply()
			assert.Equal(t, "2.0", m["jsonrpc"])
			assert.Contains(t, m, "id")
			assert.Equal(t, c.id, m["id"])
			require.IsType(t, map[string]any{}, m["error"], "%v", m)
			assert.Equal(t, c.code, m["error"].(map[string]any)["code"])
			assert.Empty(t, s.call(10, "ping", `{}`))
		})
	}
	s.t = t
	// Blank lines and whitespace around a message are no error.
	s.send("\n \r\n\t" + `{"jsonrpc":"2.0","id":11,"method":"ping"}` + " \r\n")
	m := s.reply()
	assert.EqualValues(t, 11, m["id"])
	assert.Contains(t, m, "result")
	tools := s.call(12, "tools/list", `{}`)
	assert.Len(t, tools["tools"], 10)
}

// Half a line and then the end of the input: the line is answered as no
// JSON, and the server ends as at any end of its input.
func TestMCPServerCutLastLine(t *testing.T) {
	s := serveStdio(t)
	assert.Empty(t, s.call(1, "ping", `{}`))
	s.send(`{"jsonrpc":"2.0","id":2,"method":"pi`)
	s.in.Close()
	m := s.reply()
	assert.Nil(t, m["id"])
	assert.EqualValues(t, -32700, m["error"].(map[string]any)["code"])
	select {
	case err := <-s.done:
		assert.NoError(t, err)
		s.done <- err
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not end")
	}
	_, more := <-s.replies
	assert.False(t, more)
}

// The bound is the line's, whitespace and all; a message of exactly that
// many bytes passes.
func TestLineReaderBound(t *testing.T) {
	msg := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"p":"` + strings.Repeat("x", 40) + `"}}`
	max := len(msg)
	for _, c := range []struct {
		in   string
		pass bool
	}{
		{msg + "\n", true},
		{msg + "\r\n", false},
		{" " + msg + "\n", false},
		{msg + strings.Repeat(" ", 200000) + "\n", false},
	} {
		var out bytes.Buffer
		passed, err := io.ReadAll(newLineReader(io.NopCloser(strings.NewReader(c.in+msg+"\n")), &out, max))
		require.NoError(t, err)
		if c.pass {
			assert.Equal(t, msg+"\n"+msg+"\n", string(passed))
			assert.Empty(t, out.String())
		} else {
			assert.Equal(t, msg+"\n", string(passed))
			assert.Equal(t, `{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"Invalid Request: a message longer than `+fmt.Sprint(max)+` bytes"}}`+"\n", out.String())
		}
	}
	// The last line may lack its newline.
	passed, err := io.ReadAll(newLineReader(io.NopCloser(strings.NewReader(msg)), io.Discard, max))
	require.NoError(t, err)
	assert.Equal(t, msg+"\n", string(passed))
}

// FuzzLineReader: whatever the input, every line passed on is one message
// within the bound that the SDK's own transport reads, and every reply is
// a JSON-RPC error.
func FuzzLineReader(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n",
		`{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}` + "\nnot json\n{}\n[]\n\"x\"\n",
		`{"id":7,"method":"ping"}` + "\n" + `{"jsonrpc":"2.0","id":1,"method":"ping"}{"jsonrpc":"2.0","id":2,"method":"ping"}`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"}]` + "\r\n\n  \t\n" + `{"jsonrpc":"2.0","id":"a","result":{}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized","params":{"a":[1,2,3,{"b":null}]}}` + "\n" + `{"jsonrpc":"2.0","id":3,"meth`,
		`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"p":"` + strings.Repeat("x", 100) + `"}}` + "\n",
		strings.Repeat(`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"p":"xxxxxx"}}`+"\n", 2),
	} {
		f.Add([]byte(s))
	}
	const max = 64
	f.Fuzz(func(t *testing.T, in []byte) {
		// The SDK's transport reads what is passed on, a byte at a time:
		// the newline after a message comes with the next one.
		var out, passed bytes.Buffer
		r := iotest.OneByteReader(io.TeeReader(newLineReader(io.NopCloser(bytes.NewReader(in)), &out, max), &passed))
		conn, err := (&sdk.IOTransport{Reader: io.NopCloser(r), Writer: nopWriter{}, MaxLineLength: max + 1}).Connect(context.Background())
		require.NoError(t, err)
		defer conn.Close()
		read := 0
		for ; ; read++ {
			_, err := conn.Read(context.Background())
			if err != nil {
				require.True(t, errors.Is(err, io.EOF), "message %d: %v", read, err)
				break
			}
		}

		lines := 0
		if passed.Len() > 0 {
			require.True(t, bytes.HasSuffix(passed.Bytes(), []byte("\n")))
			for _, l := range bytes.Split(bytes.TrimSuffix(passed.Bytes(), []byte("\n")), []byte("\n")) {
				lines++
				require.LessOrEqual(t, len(l), max)
				require.True(t, json.Valid(l), "%q", l)
				_, err := jsonrpc.DecodeMessage(l)
				require.NoError(t, err, "%q", l)
			}
		}
		require.Equal(t, lines, read)
		replies := 0
		for _, l := range bytes.Split(bytes.TrimSuffix(out.Bytes(), []byte("\n")), []byte("\n")) {
			if len(l) == 0 {
				continue
			}
			replies++
			var m struct {
				JSONRPC string
				ID      json.RawMessage
				Error   struct{ Code int }
			}
			require.NoError(t, json.Unmarshal(l, &m), "%q", l)
			require.Equal(t, "2.0", m.JSONRPC)
			require.NotEmpty(t, m.ID)
			require.Contains(t, []int{jsonrpc.CodeParseError, jsonrpc.CodeInvalidRequest}, m.Error.Code)
		}
		require.LessOrEqual(t, lines+replies, bytes.Count(in, []byte("\n"))+1)
	})
}

type nopWriter struct{}

func (nopWriter) Write(p []byte) (int, error) { return len(p), nil }
func (nopWriter) Close() error                { return nil }

// The id of a message cut at the bound is read at its head, or as the
// top-level object's last member; a nested one, or one of no valid type,
// is not taken.
func TestLongID(t *testing.T) {
	for _, c := range []struct{ head, tail, want string }{
		{`{"jsonrpc":"2.0","id":7,"method":"x","params":{"code":"aaa`, `aaa"}}`, `7`},
		{`{"id":"s-1","params":{"code":"aaa`, ``, `"s-1"`},
		{`{"method":"x","params":{"code":"aaa`, `aaa"}},"jsonrpc":"2.0","id":42}`, `42`},
		{`{"method":"x","params":{"code":"aaa`, `aaa"},"id":"k\"}"}` + "\r\n", `"k\"}"`},
		{`{"method":"x","params":{"code":"aaa`, `aaa","id":5}}`, ``},
		{`{"method":"x","params":{"code":"aaa`, `aaa"}},"id":{"a":1}}`, ``},
		{`{"id":null,"method":"x","params":{"code":"aaa`, `aaa"}},"id":3}`, ``},
		{`not json at all`, `nor here`, ``},
	} {
		got := longID([]byte(c.head), []byte(c.tail))
		assert.Equal(t, c.want, string(got), "%s … %s", c.head, c.tail)
	}
}
