package mcp

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/client"
)

// Every tool declares its reply cap and a search hint; exec and sessions
// load from the first turn, the rest are found by search. (What Claude
// Code does with these keys is checked in tests/claudecode_test.go.)
func TestToolMeta(t *testing.T) {
	cs := connect(t, NewServer(&client.Client{}, "test"))
	tools, err := cs.ListTools(context.Background(), nil)
	require.NoError(t, err)
	require.Len(t, tools.Tools, len(searchHints))
	for _, tl := range tools.Tools {
		m := tl.Meta
		assert.EqualValues(t, maxResultChars, m[metaMaxResult], tl.Name)
		hint, _ := m[metaSearchHint].(string)
		assert.NotEmpty(t, hint, tl.Name)
		assert.Less(t, len(hint), 200, tl.Name)
		if tl.Name == "exec" || tl.Name == "sessions" {
			assert.Equal(t, true, m[metaAlwaysLoad], tl.Name)
		} else {
			assert.NotContains(t, m, metaAlwaysLoad, tl.Name)
		}
	}
}
