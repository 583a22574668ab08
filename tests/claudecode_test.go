package tests

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/tests/claudetest"
	"github.com/replhub/replhub/tests/hubtest"
)

// claudeBin is the pinned Claude Code CLI (tests/claudecode, installed by
// `npm ci --prefix tests/claudecode` in the README's test command).
func claudeBin(t *testing.T) string {
	t.Helper()
	dir, _ := filepath.Abs("claudecode")
	bin := filepath.Join(dir, "node_modules", ".bin", "claude")
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the Claude Code CLI is missing (%v): run `npm ci --prefix tests/claudecode`", err)
		}
		t.Skip("the Claude Code CLI is missing: run `npm ci --prefix tests/claudecode`")
	}
	// The CLI that runs is the one pinned.
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "package.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &pkg))
	ver := exec.Command(bin, "--version")
	home := t.TempDir()
	ver.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "CLAUDE_CONFIG_DIR=" + filepath.Join(home, ".claude"), "DISABLE_AUTOUPDATER=1"}
	out, err := ver.Output()
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(out), pkg.Dependencies["@anthropic-ai/claude-code"]+" "), "claude --version: %s", out)
	return bin
}

// runClaude runs `claude -p` once against the stand-in, with replhub's MCP
// server as its only one (server holds extra keys for its entry). Nothing
// leaves loopback: every base URL is the stand-in, and any other request
// goes to a proxy on loopback that counts and drops it. HOME and the config
// folder are the test's.
func runClaude(t *testing.T, e *hubtest.Env, api *claudetest.Server, server map[string]any) string {
	t.Helper()
	home := filepath.Join(e.Dir, "claude-home")
	require.NoError(t, os.MkdirAll(home, 0o700))
	entry := map[string]any{"command": e.HubBin, "args": []string{"mcp"}, "env": map[string]string{
		"XDG_RUNTIME_DIR": e.Runtime, "XDG_STATE_HOME": e.State, "XDG_CONFIG_HOME": e.Config,
		"REPLHUB_PYTHON": e.Getenv("REPLHUB_PYTHON"), "REPLHUB_MEMORY_DIR": filepath.Join(home, "memory"),
	}}
	for k, v := range server {
		entry[k] = v
	}
	cfg, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"replhub": entry}})
	cfgPath := filepath.Join(e.Dir, "mcp.json")
	require.NoError(t, os.WriteFile(cfgPath, cfg, 0o600))

	// The proxy for everything but the stand-in counts and drops what
	// reaches it: nothing should.
	proxy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer proxy.Close()
	var strays atomic.Int32
	go func() {
		for {
			c, err := proxy.Accept()
			if err != nil {
				return
			}
			strays.Add(1)
			c.Close()
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, claudeBin(t), "-p", "Use the tools as scripted.",
		"--mcp-config", cfgPath, "--strict-mcp-config", "--allowedTools", "mcp__replhub__exec",
		"--output-format", "json")
	cmd.Dir = e.Cwd
	cmd.WaitDelay = 5 * time.Second
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home, "CLAUDE_CONFIG_DIR=" + filepath.Join(home, ".claude"),
		"ANTHROPIC_API_KEY=sk-ant-fake-key-for-a-loopback-stand-in",
		"ANTHROPIC_BASE_URL=" + api.URL, "CLAUDE_CODE_API_BASE_URL=" + api.URL,
		"ANTHROPIC_BEDROCK_BASE_URL=" + api.URL, "ANTHROPIC_VERTEX_BASE_URL=" + api.URL, "ANTHROPIC_FOUNDRY_BASE_URL=" + api.URL,
		"HTTPS_PROXY=http://" + proxy.Addr().String(), "HTTP_PROXY=http://" + proxy.Addr().String(), "NO_PROXY=127.0.0.1,localhost",
		"DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1", "DISABLE_BUG_COMMAND=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		// Against Anthropic's own API tool search is on by default; against
		// another base URL Claude Code turns it off unless told.
		"ENABLE_TOOL_SEARCH=true",
	}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "claude: %s", out)
	assert.Zero(t, strays.Load(), "the CLI tried to reach something other than the stand-in")
	for _, r := range api.Requests() {
		assert.True(t, strings.HasPrefix(r.Path, "/v1/messages"), "the CLI asked the stand-in for %s", r.Path)
	}
	return string(out)
}

// mainLoop reports whether r is a turn of the conversation (not a side
// request such as a title): it offers the tool search.
func mainLoop(r *claudetest.Request) bool {
	for _, name := range r.Tools() {
		if name == "ToolSearch" {
			return true
		}
	}
	return false
}

// searches find each tool that is not loaded from the first turn with words
// of its search hint that neither its name nor its description holds.
var searches = map[string]string{
	"wait":      "poll background job",
	"interrupt": "abort ctrl-c",
	"kill":      "terminate process",
	"vars":      "globals",
	"inspect":   "docstring",
	"complete":  "autocomplete",
	"reset":     "wipe",
	"memory":    "remember",
}

// What Claude Code (the pinned version, with tool search on) hands the
// model of replhub: exec and sessions in the first request, the other
// tools deferred and found by their search hints, a cell that raised as an
// error, a statement as its one line, and a flood of output whole and
// inline within the declared cap.
func TestClaudeCodeSeesReplhub(t *testing.T) {
	t.Parallel()
	claudeBin(t)
	e := hubtest.Start(t)
	newer, _ := hubtest.PickPythons(t)
	e.Setenv("REPLHUB_PYTHON", newer)

	steps := []claudetest.Block{
		claudetest.ToolUse("toolu_raise", "mcp__replhub__exec", map[string]any{"name": "cc", "code": "1/0"}),
		claudetest.ToolUse("toolu_stmt", "mcp__replhub__exec", map[string]any{"name": "cc", "code": "x = 1"}),
		claudetest.ToolUse("toolu_flood", "mcp__replhub__exec", map[string]any{"name": "cc", "code": "for i in range(20000): print('line', i, 'y' * 40)\n'z' * 20000"}),
	}
	for tool, q := range searches {
		steps = append(steps, claudetest.ToolUse("toolu_search_"+tool, "ToolSearch", map[string]any{"query": q, "max_results": 5}))
	}
	api := claudetest.Start(t, func(r *claudetest.Request) []claudetest.Block {
		if !mainLoop(r) {
			return []claudetest.Block{claudetest.Text("ok")}
		}
		done := r.ToolResults()
		for _, s := range steps {
			if _, ok := done[s["id"].(string)]; !ok {
				return []claudetest.Block{s}
			}
		}
		return []claudetest.Block{claudetest.Text("done")}
	})
	out := runClaude(t, e, api, nil)

	var turns []*claudetest.Request
	for _, r := range api.Requests() {
		if mainLoop(r) {
			turns = append(turns, r)
		}
	}
	require.Len(t, turns, len(steps)+1, "one turn per step and the last: %s", out)
	first := turns[0]
	assert.Contains(t, first.Tools(), "mcp__replhub__exec", "exec loads from the first turn")
	assert.Contains(t, first.Tools(), "mcp__replhub__sessions", "sessions loads from the first turn")
	for tool := range searches {
		assert.NotContains(t, first.Tools(), "mcp__replhub__"+tool, "%s is deferred", tool)
		assert.Contains(t, first.Text(), "mcp__replhub__"+tool, "%s is named among the deferred tools", tool)
	}

	results := turns[len(turns)-1].ToolResults()
	r := results["toolu_raise"]
	assert.True(t, r.IsError, "a cell that raised is an error: %+v", r)
	assert.Contains(t, r.Text, "ZeroDivisionError: division by zero")
	assert.Contains(t, r.Text, "[created session 'cc'")
	r = results["toolu_stmt"]
	assert.False(t, r.IsError)
	assert.Equal(t, "[cell 2 ran: no output, no value]", strings.TrimSpace(r.Text))
	r = results["toolu_flood"]
	assert.False(t, r.IsError)
	// 30,000 characters of output and a 10,000-character value pass the
	// 40,000 the tool declares: replhub cuts its reply to that, and Claude
	// Code hands it on whole and inline, not saved to a file.
	n := len(utf16.Encode([]rune(r.Text)))
	assert.InDelta(t, 40000, n, 100, "the reply reaches the model whole, inline, at the declared maxResultSizeChars: %.300s", r.Text)
	assert.True(t, strings.HasPrefix(r.Text, "line 0 yyyy"), "%.200s", r.Text)
	assert.Contains(t, r.Text, "characters of this reply left out")
	assert.True(t, strings.HasSuffix(strings.TrimSpace(r.Text), "zzz'"), "the value, at the end, is kept: %.200s", r.Text[max(0, len(r.Text)-200):])
	for tool, q := range searches {
		r := results["toolu_search_"+tool]
		assert.True(t, strings.HasPrefix(r.Text, "<tool_reference mcp__replhub__"+tool+">"), "ToolSearch %q finds %s first: %.500s", q, tool, r.Text)
	}
}

// A server entry with "alwaysLoad": true loads every tool of replhub from
// the first turn.
func TestClaudeCodeServerAlwaysLoad(t *testing.T) {
	t.Parallel()
	claudeBin(t)
	e := hubtest.Start(t)
	api := claudetest.Start(t, func(*claudetest.Request) []claudetest.Block {
		return []claudetest.Block{claudetest.Text("done")}
	})
	out := runClaude(t, e, api, map[string]any{"alwaysLoad": true})
	var first *claudetest.Request
	for _, r := range api.Requests() {
		if mainLoop(r) {
			first = r
			break
		}
	}
	require.NotNil(t, first, "%s", out)
	for _, tool := range []string{"exec", "sessions", "wait", "interrupt", "kill", "vars", "inspect", "complete", "reset", "memory"} {
		assert.Contains(t, first.Tools(), "mcp__replhub__"+tool)
	}
}
