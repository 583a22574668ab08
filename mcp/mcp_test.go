package mcp

import (
	"context"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/client"
	"github.com/replhub/replhub/config"
)

func TestInstructionsFit(t *testing.T) {
	assert.Less(t, len(Instructions), 2048)
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
	ct, st := sdk.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := s.Connect(ctx, st, nil)
	require.NoError(t, err)
	defer ss.Close()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, ct, nil)
	require.NoError(t, err)
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	assert.ElementsMatch(t, []string{"exec", "wait", "interrupt", "kill", "sessions"}, names)
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "sessions", Arguments: map[string]any{}})
	require.NoError(t, err)
	assert.True(t, res.IsError)
	assert.Contains(t, res.Content[0].(*sdk.TextContent).Text, "no hub is listening")
}
