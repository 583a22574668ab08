package tests

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/tests/hubtest"
)

// The query tools through a real `replhub mcp` and the official SDK: their
// annotations, and their text is what the CLI prints.
func TestMCPQueryTools(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	newer, _ := hubtest.PickPythons(t)
	e.Setenv("REPLHUB_PYTHON", newer)
	cs := mcpSession(t, e, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	tools, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	byName := map[string]*sdk.Tool{}
	for _, tl := range tools.Tools {
		byName[tl.Name] = tl
	}
	for _, n := range []string{"vars", "inspect", "complete"} {
		require.Contains(t, byName, n)
		assert.True(t, byName[n].Annotations.ReadOnlyHint, n)
	}
	require.Contains(t, byName, "reset")
	assert.False(t, byName["reset"].Annotations.ReadOnlyHint)
	require.NotNil(t, byName["reset"].Annotations.DestructiveHint)
	assert.True(t, *byName["reset"].Annotations.DestructiveHint)
	assert.Contains(t, byName["inspect"].Description, "runs the session's code")

	call := func(name string, args map[string]any) (string, bool) {
		return callText(t, ctx, cs, &sdk.CallToolParams{Name: name, Arguments: args})
	}
	text, isErr := call("exec", map[string]any{"name": "q", "code": "import json\ncfg = {'port': 8080}\ndef f(a, b=2):\n    'Doc.'\n    return a"})
	require.False(t, isErr, text)

	text, isErr = call("vars", map[string]any{"name": "q"})
	assert.False(t, isErr)
	assert.Equal(t, ok(t, e.Run("vars", "q")), text)
	text, _ = call("inspect", map[string]any{"name": "q", "expr": "f"})
	assert.Contains(t, text, "signature: (a, b=2)")
	assert.Contains(t, text, "  Doc.")
	text, isErr = call("inspect", map[string]any{"name": "q", "expr": "nope"})
	assert.True(t, isErr)
	assert.Contains(t, text, "NameError")
	text, _ = call("complete", map[string]any{"name": "q", "text": `cfg["p`})
	assert.Equal(t, `cfg["port"]`+"\n", text)

	// A busy session: a short wait says so; reset refuses.
	dir := t.TempDir()
	cell := busy{t: t, gate: filepath.Join(dir, "gate"), armed: filepath.Join(dir, "armed")}
	text, _ = call("exec", map[string]any{"name": "q", "code": cell.code(), "timeout": 0.2})
	assert.Contains(t, text, "still running")
	text, isErr = call("vars", map[string]any{"name": "q", "wait": -1})
	assert.True(t, isErr)
	assert.Contains(t, text, "is busy: cell 2 is running")
	text, isErr = call("reset", map[string]any{"name": "q"})
	assert.True(t, isErr)
	assert.Contains(t, text, "reset refuses a busy session")
	// The cell ends while the next call waits for it.
	cell.endOnceAsked()
	text, isErr = call("vars", map[string]any{"name": "q", "wait": 20})
	assert.False(t, isErr, text)
	assert.Contains(t, text, "for cell 2 to finish]")

	text, isErr = call("reset", map[string]any{"name": "q", "keep_imports": true})
	assert.False(t, isErr, text)
	assert.Equal(t, "reset session 'q': 3 names removed; modules kept: json, os, time\n", text)
}
