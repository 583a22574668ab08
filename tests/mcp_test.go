package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf16"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/tests/hubtest"
)

// mcpSession starts `replhub mcp` as a real subprocess and connects an SDK
// client to it.
func mcpSession(t *testing.T, e *hubtest.Env, progress *atomic.Int32) *sdk.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.Command(e.HubBin, "mcp")
	cmd.Env = e.Vars
	cmd.Dir = e.Cwd
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *sdk.ProgressNotificationClientRequest) {
			if progress != nil {
				progress.Add(1)
			}
		},
	})
	cs, err := c.Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { cs.Close() })
	return cs
}

func callText(t *testing.T, ctx context.Context, cs *sdk.ClientSession, params *sdk.CallToolParams) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(ctx, params)
	require.NoError(t, err)
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

func TestMCPServer(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	newer, _ := hubtest.PickPythons(t)
	e.Setenv("REPLHUB_PYTHON", newer)
	memDir := t.TempDir()
	e.Setenv("REPLHUB_MEMORY_DIR", memDir)
	var progress atomic.Int32
	cs := mcpSession(t, e, &progress)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	init := cs.InitializeResult()
	assert.Less(t, len(init.Instructions), 2048)
	assert.True(t, strings.HasPrefix(init.Instructions, "replhub keeps named Python sessions"))
	assert.Contains(t, init.Instructions, "call sessions and reuse")

	tools, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	byName := map[string]*sdk.Tool{}
	for _, tl := range tools.Tools {
		byName[tl.Name] = tl
	}
	require.Len(t, byName, 10)
	for _, n := range []string{"exec", "wait", "interrupt", "kill", "sessions", "memory"} {
		require.Contains(t, byName, n)
	}
	assert.True(t, byName["sessions"].Annotations.ReadOnlyHint)
	assert.True(t, byName["wait"].Annotations.ReadOnlyHint)
	assert.False(t, byName["exec"].Annotations.ReadOnlyHint)
	require.NotNil(t, byName["kill"].Annotations.DestructiveHint)
	assert.True(t, *byName["kill"].Annotations.DestructiveHint)
	assert.EqualValues(t, 40000, byName["exec"].Meta["anthropic/maxResultSizeChars"])
	require.NotNil(t, byName["memory"].Annotations.DestructiveHint)
	assert.False(t, *byName["memory"].Annotations.DestructiveHint)
	schema, _ := json.Marshal(byName["exec"].InputSchema)
	for _, f := range []string{"name", "code", "timeout", "python"} {
		assert.Contains(t, string(schema), `"`+f+`"`)
	}

	text, isErr := callText(t, ctx, cs, &sdk.CallToolParams{Name: "exec", Arguments: map[string]any{"name": "m", "code": "x = 20\nx + 1"}})
	assert.False(t, isErr)
	assert.Contains(t, text, "[created session 'm' (python 3.")
	assert.Contains(t, text, "Out[1]: 21")
	// The tool's text is what the CLI prints.
	r := e.Run("exec", "m", "x + 2")
	text, _ = callText(t, ctx, cs, &sdk.CallToolParams{Name: "exec", Arguments: map[string]any{"name": "m", "code": "x + 2"}})
	assert.Equal(t, strings.Replace(r.Stdout, "Out[2]", "Out[3]", 1), text)

	// memory works in the server's own process, on its environment's folder.
	text, isErr = callText(t, ctx, cs, &sdk.CallToolParams{Name: "memory", Arguments: map[string]any{"op": "write", "name": "n", "text": "t\n", "index": "hook"}})
	assert.False(t, isErr, text)
	b, err := os.ReadFile(filepath.Join(memDir, "MEMORY.md"))
	require.NoError(t, err)
	assert.Equal(t, "- [n](n.md) — hook\n", string(b))
	text, _ = callText(t, ctx, cs, &sdk.CallToolParams{Name: "memory", Arguments: map[string]any{"op": "list"}})
	assert.Equal(t, "memory: "+memDir+" (1 entry)\nn.md  hook\n", text)

	text, _ = callText(t, ctx, cs, &sdk.CallToolParams{Name: "sessions", Arguments: map[string]any{}})
	assert.Regexp(t, `(?m)^m  pid \d+  python 3\.`, text)
	assert.Contains(t, text, "names: x")

	text, isErr = callText(t, ctx, cs, &sdk.CallToolParams{Name: "exec", Arguments: map[string]any{"name": "bad name", "code": "1"}})
	assert.True(t, isErr)
	assert.Contains(t, text, "bad session name")

	// Progress while a call blocks, when the client asks for it.
	params := &sdk.CallToolParams{Name: "exec", Arguments: map[string]any{"name": "m", "code": "import time; time.sleep(2.5); 'slept'"}}
	params.SetProgressToken("tok-1")
	text, _ = callText(t, ctx, cs, params)
	assert.Contains(t, text, "'slept'")
	assert.GreaterOrEqual(t, progress.Load(), int32(1))

	// Timeout then wait.
	text, _ = callText(t, ctx, cs, &sdk.CallToolParams{Name: "exec", Arguments: map[string]any{"name": "m", "code": "time.sleep(1.5); 'later'", "timeout": 0.3}})
	assert.Contains(t, text, "still running")
	text, _ = callText(t, ctx, cs, &sdk.CallToolParams{Name: "wait", Arguments: map[string]any{"name": "m", "timeout": 10}})
	assert.Contains(t, text, "'later'")

	// A call the client cancels interrupts its cell.
	cctx, ccancel := context.WithTimeout(ctx, time.Second)
	_, err = cs.CallTool(cctx, &sdk.CallToolParams{Name: "exec", Arguments: map[string]any{"name": "m", "code": "time.sleep(60)", "timeout": 120}})
	ccancel()
	require.Error(t, err)
	waitFor(t, func() bool {
		l := sessionList(t, e)
		return len(l.Sessions) == 1 && l.Sessions[0].State == "idle"
	}, func() string { return "the cancelled call's cell was not interrupted" })
	b, _ = exec.Command("cat", e.Paths.Transcript("m")).Output()
	assert.Contains(t, string(b), "time.sleep(60)")
	// Its output was not thrown away with the cancelled call's response.
	text, isErr = callText(t, ctx, cs, &sdk.CallToolParams{Name: "wait", Arguments: map[string]any{"name": "m"}})
	assert.True(t, isErr, text)
	assert.Contains(t, text, "the client cancelled the call that ran cell 6, so it was interrupted")
	assert.Contains(t, text, "KeyboardInterrupt")

	text, _ = callText(t, ctx, cs, &sdk.CallToolParams{Name: "interrupt", Arguments: map[string]any{"name": "m"}})
	assert.Contains(t, text, "nothing to interrupt")

	// A restarted MCP server loses nothing: all state is in the hub.
	cs.Close()
	cs2 := mcpSession(t, e, nil)
	text, _ = callText(t, ctx, cs2, &sdk.CallToolParams{Name: "exec", Arguments: map[string]any{"name": "m", "code": "x"}})
	assert.Contains(t, text, ": 20")
	text, _ = callText(t, ctx, cs2, &sdk.CallToolParams{Name: "kill", Arguments: map[string]any{"name": "m"}})
	assert.Contains(t, text, "killed session 'm'")
}

func TestSelfTest(t *testing.T) {
	t.Parallel()
	pythons(t, func(t *testing.T, py string) {
		e := hubtest.Start(t)
		r := e.Run("self-test", "--python", py)
		require.Equal(t, 0, r.Code, "%s", r)
		assert.Equal(t, 7, strings.Count(r.Stdout, "PASS "))
		assert.Contains(t, r.Stdout, "self-test: PASS, all 7 checks passed")
		// It used a private hub, not this world's.
		assert.Equal(t, 0, e.HubPid())
	})
}

func TestSelfTestSaysWhatToDo(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	r := e.Run("self-test", "--python", filepath.Join(e.Dir, "no-such-python"))
	assert.Equal(t, 1, r.Code, "%s", r)
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	assert.Equal(t, "self-test: FAIL, 7 of 7 checks failed; no Python could start: install python3 (Debian: sudo apt-get install -y python3; macOS: brew install python) or pass --python PATH", lines[len(lines)-1])
}

// TestMCPReplies checks what a reply says through MCP: failures marked
// isError, a line for a cell that returned nothing, advice in terms of the
// tools, each death told once per connection, and every reply within the
// size declared for it.
func TestMCPReplies(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	newer, _ := hubtest.PickPythons(t)
	e.Setenv("REPLHUB_PYTHON", newer)
	cs := mcpSession(t, e, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	call := func(cs *sdk.ClientSession, tool string, args map[string]any) (string, bool) {
		t.Helper()
		return callText(t, ctx, cs, &sdk.CallToolParams{Name: tool, Arguments: args})
	}
	exec := func(cs *sdk.ClientSession, name, code string) (string, bool) {
		t.Helper()
		return call(cs, "exec", map[string]any{"name": name, "code": code})
	}

	// Failures are errors; a cell with nothing to show says so.
	text, isErr := exec(cs, "m", "x = 1")
	assert.False(t, isErr, text)
	assert.Contains(t, text, "[cell 1 ran: no output, no value]")
	text, isErr = exec(cs, "m", "1/0")
	assert.True(t, isErr, text)
	assert.Contains(t, text, "ZeroDivisionError")
	text, isErr = exec(cs, "m", "x + 1")
	assert.False(t, isErr, text)
	assert.Contains(t, text, "Out[3]: 2")

	// Advice names tools and their arguments, never the shell.
	gate := filepath.Join(t.TempDir(), "gate")
	text, _ = call(cs, "exec", map[string]any{"name": "m", "code": fmt.Sprintf("import time\nwhile not __import__('os').path.exists(%q): time.sleep(0.02)", gate), "timeout": 0.2})
	assert.Contains(t, text, "call wait with name 'm' collects its output and result, call interrupt with name 'm' stops it")
	text, isErr = exec(cs, "m", "1")
	assert.True(t, isErr, text)
	assert.Contains(t, text, "call wait with name 'm' waits for it")
	openGate(t, gate)
	call(cs, "wait", map[string]any{"name": "m", "timeout": 10})
	text, isErr = call(cs, "exec", map[string]any{"name": "m", "code": "1", "sudo": true})
	assert.True(t, isErr)
	assert.Contains(t, text, "call exec with name 'm' omit sudo reaches it")
	text, isErr = call(cs, "wait", map[string]any{"name": "nope"})
	assert.True(t, isErr)
	assert.Contains(t, text, "call exec with name 'nope' creates it; call sessions lists them")
	for _, s := range []string{text} {
		assert.NotContains(t, s, "replhub ")
	}

	// Every reply keeps to the declared size, an unread earlier result put
	// in front included, counted as a JavaScript client counts (UTF-16).
	text, _ = call(cs, "exec", map[string]any{"name": "m", "code": "time.sleep(0.5); print('\U0001F600' * 20000)", "timeout": 0.1})
	assert.Contains(t, text, "still running")
	waitFor(t, func() bool { s := liveOf(sessionList(t, e), "m"); return s != nil && s.State == "idle" && s.Unread })
	text, _ = exec(cs, "m", "print('x' * 29000); 'end'")
	has := func(sub string) { t.Helper(); assert.True(t, strings.Contains(text, sub), "want %q in the reply", sub) }
	assert.LessOrEqual(t, len(utf16.Encode([]rune(text))), 40000)
	has("[cell 5 finished while nobody waited; its reply comes first]")
	has("characters of this reply left out")
	has("Out[6]: 'end'")
	// An error is cut shorter, keeping the traceback's end.
	text, isErr = exec(cs, "m", "print('y' * 20000); 1/0")
	assert.True(t, isErr)
	assert.LessOrEqual(t, len(text), 10000)
	has("ZeroDivisionError: division by zero")

	// A session that dies is an error, and each death is told once per
	// MCP connection, in one short line.
	text, isErr = exec(cs, "d1", "import os; os._exit(3)")
	assert.True(t, isErr, text)
	assert.Contains(t, text, "died while running cell 1")
	for _, n := range []string{"d2", "d3", "d4", "d5"} {
		e.Run("exec", n, "import os; os._exit(3)")
	}
	text, _ = exec(cs, "m", "1")
	assert.Contains(t, text, "[other sessions: d1, d2, d3, d4 and 1 more died (5): call sessions shows how]")
	text, _ = exec(cs, "m", "2")
	assert.NotContains(t, text, "died")
	cs2 := mcpSession(t, e, nil)
	text, _ = exec(cs2, "m", "3")
	assert.Contains(t, text, "d1, d2, d3, d4 and 1 more died (5)")
	text, _ = exec(cs2, "m", "4")
	assert.NotContains(t, text, "died")
	// A new death under a told name is told again.
	exec(cs, "d1", "5")
	exec(cs, "d1", "import os; os._exit(3)")
	text, _ = exec(cs, "m", "6")
	assert.Contains(t, text, "[other sessions: d1 died: call sessions shows how]")
	// The CLI hears of them on every call.
	for i := 0; i < 2; i++ {
		r := e.Run("exec", "m", "7")
		assert.Contains(t, r.Stdout, "died (5): `replhub sessions` shows how")
	}
}
