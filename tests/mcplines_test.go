package tests

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/tests/hubtest"
)

// TestMCPBadLinesLeaveCellsAlone: lines that are no JSON-RPC message, sent
// to `replhub mcp` while a call's cell runs, each get their error; the
// server reads on, and the cell runs to its end and its call gets the
// reply.
func TestMCPBadLinesLeaveCellsAlone(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	newer, _ := hubtest.PickPythons(t)
	e.Setenv("REPLHUB_PYTHON", newer)
	cmd := exec.Command(e.HubBin, "mcp")
	cmd.Env = e.Vars
	cmd.Dir = e.Cwd
	var stderr hubtest.LockedBuffer // written by the command's copier as the test reads it
	cmd.Stderr = &stderr
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	replies := make(chan map[string]any, 64)
	go func() {
		defer close(replies)
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) != nil {
				m = map[string]any{"not JSON": sc.Text()}
			}
			replies <- m
		}
	}()
	send := func(line string) {
		t.Helper()
		_, err := io.WriteString(in, line+"\n")
		require.NoError(t, err)
	}
	next := func() map[string]any {
		t.Helper()
		select {
		case m, ok := <-replies:
			require.True(t, ok, "the server ended: %s", stderr.String())
			return m
		case <-time.After(30 * time.Second):
			t.Fatal("no reply")
			return nil
		}
	}

	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	require.Contains(t, next(), "result")
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	gate := filepath.Join(t.TempDir(), "gate")
	code := fmt.Sprintf("import os, time\nwhile not os.path.exists(%q): time.sleep(0.02)\n'done'", gate)
	args, _ := json.Marshal(map[string]any{"name": "m", "code": code, "timeout": 60})
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"exec","arguments":` + string(args) + `}}`)
	waitFor(t, func() bool { s := liveOf(sessionList(t, e), "m"); return s != nil && s.State == "running" })

	ping := `{"jsonrpc":"2.0","id":3,"method":"ping"}`
	bad := []struct {
		line string
		code float64
	}{
		{`{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, -32600},
		{`not json`, -32700},
		{`{}`, -32600},
		{`[]`, -32600},
		{`[` + ping + `]`, -32600},
		{`"x"`, -32600},
		{`{"id":7,"method":"ping"}`, -32600},
		{ping + ping, -32700},
		{`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"exec","arguments":{"name":"m","code":"` + strings.Repeat("a", 20<<20) + `"}}}`, -32600},
	}
	for _, b := range bad {
		send(b.line)
		m := next()
		require.Contains(t, m, "error", "%v", m)
		assert.Equal(t, b.code, m["error"].(map[string]any)["code"], "%.80s: %v", b.line, m)
	}
	send(ping)
	m := next()
	assert.EqualValues(t, 3, m["id"])
	assert.Contains(t, m, "result")

	openGate(t, gate)
	m = next()
	require.EqualValues(t, 2, m["id"], "%v", m)
	res, _ := json.Marshal(m["result"])
	assert.Contains(t, string(res), "Out[1]: 'done'")
	assert.NotContains(t, string(res), `"isError":true`)

	// The end of the input ends the server, as ever.
	require.NoError(t, in.Close())
	for range replies {
	}
	assert.NoError(t, cmd.Wait(), "%s", stderr.String())
}
