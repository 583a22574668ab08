package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/client"
	"github.com/replhub/replhub/config"
	"github.com/replhub/replhub/memory"
	"github.com/replhub/replhub/modules"
)

// connect serves s over in-memory transports to an SDK client; both end
// with the test.
func connect(t *testing.T, s *sdk.Server) *sdk.ClientSession {
	t.Helper()
	ct, st := sdk.NewInMemoryTransports()
	ss, err := s.Connect(context.Background(), st, nil)
	require.NoError(t, err)
	t.Cleanup(func() { ss.Close() })
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil).Connect(context.Background(), ct, nil)
	require.NoError(t, err)
	t.Cleanup(func() { cs.Close() })
	return cs
}

func TestInstructionsFit(t *testing.T) {
	assert.Less(t, len(instructions(modules.List(""))), 2048)
}

func TestToolsAndAFailedCall(t *testing.T) {
	dir := t.TempDir()
	p, err := config.FromEnv(func(k string) string {
		if k == "XDG_RUNTIME_DIR" {
			return dir
		}
		return "/tmp"
	})
	require.NoError(t, err)
	// No hub and no autostart: every call must fail as a tool error, not a
	// protocol error, so that the agent reads why.
	s := NewServer(&client.Client{Paths: p}, "test")
	ctx := context.Background()
	cs := connect(t, s)
	tools, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	assert.ElementsMatch(t, []string{"exec", "wait", "interrupt", "kill", "sessions", "memory", "vars", "inspect", "complete", "reset"}, names)
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "sessions", Arguments: map[string]any{}})
	require.NoError(t, err)
	assert.True(t, res.IsError)
	assert.Contains(t, res.Content[0].(*sdk.TextContent).Text, "no hub is listening")
}

func TestMemoryTool(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	for _, k := range []string{"CLAUDE_CONFIG_DIR", "REPLHUB_MEMORY_DIR", "CLAUDE_CODE_PROJECT_DIR_NAME"} {
		t.Setenv(k, "")
	}
	proj, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	// The tool needs no hub: this client has none.
	s := NewServer(&client.Client{}, "test")
	ctx := context.Background()
	cs := connect(t, s)

	tools, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	var tool *sdk.Tool
	for _, tl := range tools.Tools {
		if tl.Name == "memory" {
			tool = tl
		}
	}
	require.NotNil(t, tool)
	a := tool.Annotations
	assert.False(t, a.ReadOnlyHint)
	require.NotNil(t, a.DestructiveHint)
	assert.False(t, *a.DestructiveHint, "a client may allow it outright")
	require.NotNil(t, a.OpenWorldHint)
	assert.False(t, *a.OpenWorldHint)
	assert.Contains(t, tool.Description, "MEMORY.md")

	call := func(args map[string]any) (string, bool) {
		t.Helper()
		args["cwd"] = proj
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "memory", Arguments: args})
		require.NoError(t, err)
		return res.Content[0].(*sdk.TextContent).Text, res.IsError
	}
	out, isErr := call(map[string]any{"op": "write", "name": "testing", "text": "go test -race\n", "index": "how tests run"})
	assert.False(t, isErr, out)
	assert.Equal(t, "wrote testing.md (14 bytes); MEMORY.md line added", out)
	dir := filepath.Join(home, ".claude", "projects", memory.Slug(proj), "memory")
	b, err := os.ReadFile(filepath.Join(dir, "MEMORY.md"))
	require.NoError(t, err)
	assert.Equal(t, "- [testing](testing.md) — how tests run\n", string(b))
	out, _ = call(map[string]any{"op": "list"})
	assert.Equal(t, "memory: "+dir+" (1 entry)\ntesting.md  how tests run\n", out)
	out, _ = call(map[string]any{"op": "edit", "name": "testing.md", "old": "race", "new": "race ./..."})
	assert.Equal(t, "edited testing.md (20 bytes)", out)
	out, _ = call(map[string]any{"op": "read", "name": "testing"})
	assert.Equal(t, "go test -race ./...\n", out)
	for _, c := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"op": "edit", "name": "testing", "old": "t", "new": "x"}, "memory: old text occurs 2 times in testing.md"},
		{map[string]any{"op": "read", "name": "../../etc/passwd"}, "is a path"},
		{map[string]any{"op": "read", "name": "nope"}, "memory: no entry nope.md in " + dir},
		{map[string]any{"op": "forget"}, `memory: unknown op "forget"`},
	} {
		out, isErr := call(c.args)
		assert.True(t, isErr)
		assert.Contains(t, out, c.want)
	}
	out, _ = call(map[string]any{"op": "delete", "name": "testing"})
	assert.Equal(t, "deleted testing.md and its MEMORY.md line", out)
}

func TestInstructionsListModules(t *testing.T) {
	shipped := modules.List("")
	s := instructions(shipped)
	assert.LessOrEqual(t, len(s), 2047)
	assert.NotContains(t, s, "{modules}")
	assert.Contains(t, s, "from replhub import NAME; modules() lists them")
	for _, m := range shipped {
		assert.Contains(t, s, m.Name)
	}
	assert.Contains(t, s, "systemd: units")

	// However many the user has, the instructions stay under 2 KB.
	many := append([]modules.Info(nil), shipped...)
	for i := 0; i < 200; i++ {
		many = append(many, modules.Info{Name: fmt.Sprintf("mod%03d", i), Doc: strings.Repeat("ü", 90), User: true})
	}
	s = instructions(many)
	assert.LessOrEqual(t, len(s), 2047)
	assert.True(t, utf8.ValidString(s))
	assert.Contains(t, s, "mod000 (yours)")
	assert.Contains(t, s, "; and more")
	assert.True(t, strings.HasSuffix(s, "user's privileges."))

	// The server reads the user's folder when it starts.
	dir := t.TempDir()
	p, err := config.FromEnv(func(k string) string {
		return map[string]string{"XDG_CONFIG_HOME": dir, "XDG_RUNTIME_DIR": dir, "HOME": dir}[k]
	})
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(p.Modules(), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(p.Modules(), "cad.py"), []byte(`"""Drawings."""`), 0o600))
	cs := connect(t, NewServer(&client.Client{Paths: p}, "test"))
	assert.Contains(t, cs.InitializeResult().Instructions, "cad (yours): Drawings.")
}

// An integer argument beyond int's range is refused by the tool's own
// range check, not with the JSON decoder's words; the schema still says
// integer.
func TestIntArgumentsBeyondRange(t *testing.T) {
	p, err := config.FromEnv(func(k string) string {
		if k == "XDG_RUNTIME_DIR" {
			return t.TempDir()
		}
		return "/tmp"
	})
	require.NoError(t, err)
	cs := connect(t, NewServer(&client.Client{Paths: p}, "test"))
	tools, err := cs.ListTools(context.Background(), nil)
	require.NoError(t, err)
	ints := 0
	for _, tl := range tools.Tools {
		b, err := json.Marshal(tl.InputSchema)
		require.NoError(t, err)
		var schema struct {
			Properties map[string]struct {
				Type any `json:"type"`
			} `json:"properties"`
		}
		require.NoError(t, json.Unmarshal(b, &schema))
		for _, k := range []string{"max_output", "cell", "limit", "fanout"} {
			if p, ok := schema.Properties[k]; ok {
				assert.Equal(t, "integer", p.Type, "%s's %s", tl.Name, k)
				ints++
			}
		}
	}
	assert.Equal(t, 7, ints, "the integer arguments")
	const maxOutput = "replhub: max_output must be between 1 and 40000 (a reply holds at most 40000 characters)"
	const timeout = "replhub: timeout must be between 0 and 600 seconds"
	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"exec", map[string]any{"name": "s", "code": "1", "max_output": 1e20}, maxOutput},
		{"exec", map[string]any{"name": "s", "code": "1", "max_output": -1e300}, maxOutput},
		{"wait", map[string]any{"name": "s", "max_output": 1e20}, maxOutput},
		{"exec", map[string]any{"name": "s", "code": "1", "timeout": 1e10}, timeout},
		{"exec", map[string]any{"name": "s", "code": "1", "timeout": -1}, timeout},
		{"wait", map[string]any{"name": "s", "timeout": 1e300}, timeout},
		{"wait", map[string]any{"name": "s", "timeout": 601}, timeout},
	} {
		res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: c.tool, Arguments: c.args})
		require.NoError(t, err)
		assert.True(t, res.IsError)
		assert.Equal(t, c.want, res.Content[0].(*sdk.TextContent).Text, "%s %v", c.tool, c.args)
	}
	var n Int
	for in, want := range map[string]Int{"7": 7, "-3": -3, "1e20": math.MaxInt, "-1e400": math.MinInt, "1e400": math.MaxInt, "null": 0} {
		n = 0
		require.NoError(t, n.UnmarshalJSON([]byte(in)), in)
		assert.Equal(t, want, n, in)
	}
	assert.Error(t, n.UnmarshalJSON([]byte(`"x"`)))
}
