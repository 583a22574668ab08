package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/tests/hubtest"
)

// runMCPJS runs script of tests/mcpjs with node against a fresh hub whose
// sessions use python, the binary in REPLHUB_BIN, and returns its output;
// a script that exits non-zero fails the test.
func runMCPJS(t *testing.T, script, python string) string {
	t.Helper()
	node, err := exec.LookPath("node")
	dir, _ := filepath.Abs("mcpjs")
	_, serr := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk"))
	if err != nil || serr != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("node or the MCP TypeScript SDK is missing (node: %v, sdk: %v): run `npm ci --prefix tests/mcpjs`", err, serr)
		}
		t.Skip("node or the MCP TypeScript SDK is missing: run `npm ci --prefix tests/mcpjs`")
	}
	e := hubtest.Start(t)
	e.Setenv("REPLHUB_PYTHON", python)
	cmd := exec.Command(node, filepath.Join(dir, script))
	cmd.Env = append(append([]string(nil), e.Vars...), "REPLHUB_BIN="+e.HubBin)
	cmd.Dir = e.Cwd
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	return string(out)
}

// TestMCPCancelTypeScriptSDK drives `replhub mcp` with the official MCP
// TypeScript SDK (tests/mcpjs, installed by `npm ci --prefix tests/mcpjs`
// in the README's test command): calls cancelled by the client's request
// timeout and by an abort get no response, and their cells' output comes
// with the next wait or exec.
func TestMCPCancelTypeScriptSDK(t *testing.T) {
	t.Parallel()
	newer, _ := hubtest.PickPythons(t)
	require.Contains(t, runMCPJS(t, "cancel.mjs", newer), "ok: 2 cancelled calls")
}

// TestMCPImagesTypeScriptSDK: the TypeScript SDK takes replhub's image
// blocks (it validates every reply against the MCP schema), bounded, at
// most four a reply.
func TestMCPImagesTypeScriptSDK(t *testing.T) {
	t.Parallel()
	newer, _ := hubtest.PickPythons(t)
	require.Contains(t, runMCPJS(t, "images.mjs", newer), "ok: images")
}
