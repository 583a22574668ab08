package tests

import (
	"context"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/tests/hubtest"
)

func TestMaxOutputPerCall(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	newer, _ := hubtest.PickPythons(t)
	e.Setenv("REPLHUB_PYTHON", newer)

	// Below the default: head and tail, and --json says how much was cut.
	res, r := jsonResult(t, e, "exec", "--json", "m", `print("a" * 500 + "z" * 500)`, "--max-output", "100")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.True(t, res.Truncated)
	assert.Equal(t, 901, res.TruncatedChars)
	assert.True(t, strings.HasPrefix(res.Output, strings.Repeat("a", 50)+"\n[... 901 characters left out ...]\n"), res.Output)
	assert.True(t, strings.HasSuffix(res.Output, strings.Repeat("z", 49)+"\n"), res.Output)

	// Above it: what the default would cut comes whole.
	res, r = jsonResult(t, e, "exec", "--json", "m", `print("b" * 50000)`)
	assert.True(t, res.Truncated, "the default cuts 50,000: %s", r)
	res, r = jsonResult(t, e, "exec", "--json", "m", `print("b" * 50000)`, "--max-output", "60000")
	assert.False(t, res.Truncated, "%s", r)
	assert.Equal(t, 0, res.TruncatedChars)
	assert.Len(t, res.Output, 50001)

	// wait takes its own cap, for the running cell and the finished one.
	r = e.Run("exec", "m", `import time; print("c" * 3000, flush=True); time.sleep(2.5); print("d" * 3000)`, "-t", "1", "--max-output", "10")
	assert.Equal(t, 3, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "[... 2991 characters left out ...]")
	r = e.Run("wait", "m", "--json", "--max-output", "2000")
	assert.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, `"truncated": true`)
	assert.Contains(t, r.Stdout, `"truncated_chars": 1001`)

	// A result nobody collected comes first in the next reply, under that
	// reply's cap too.
	r = e.Run("exec", "m", `time.sleep(0.5); print("f" * 5000)`, "-t", "0.1")
	assert.Equal(t, 3, r.Code, "%s", r)
	waitFor(t, func() bool { return sessionInfo(t, e, "m").Unread }, func() string { return "the cell's result never waited unread" })
	res, r = jsonResult(t, e, "exec", "--json", "m", "2", "--max-output", "100")
	assert.Contains(t, res.Notes[0], "finished while nobody waited", "%s", r)
	require.NotNil(t, res.Earlier, "%s", r)
	assert.Contains(t, res.Earlier.Output, "[... 4901 characters left out ...]")
	assert.Less(t, len(res.Earlier.Output), 300)

	for _, bad := range []string{"-1", "2000001"} {
		r = e.Run("exec", "m", "1", "--max-output", bad)
		assert.Equal(t, 2, r.Code, "%s", r)
		assert.Contains(t, r.Stderr, "--max-output must be between 1 and 2000000")
	}

	// MCP: max_output, within what one reply holds.
	cs := mcpSession(t, e, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	text, isErr := callText(t, ctx, cs, &sdk.CallToolParams{Name: "exec", Arguments: map[string]any{"name": "m", "code": `print("e" * 1000)`, "max_output": 20}})
	assert.False(t, isErr, text)
	assert.Contains(t, text, strings.Repeat("e", 10)+"\n[... 981 characters left out ...]\n"+strings.Repeat("e", 9)+"\n")
	text, isErr = callText(t, ctx, cs, &sdk.CallToolParams{Name: "wait", Arguments: map[string]any{"name": "m", "max_output": 50000}})
	assert.True(t, isErr, text)
	assert.Contains(t, text, "max_output must be between 1 and 40000")
}
