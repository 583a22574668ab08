package tests

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runBlocks are AGENTS.md's fenced blocks marked "sh run", in order: the
// shell commands an agent runs to install replhub.
func runBlocks(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var blocks []string
	var cur *strings.Builder // the block being read; nil outside one
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "```") && !in:
			in = true
			if strings.TrimSpace(strings.TrimPrefix(line, "```")) == "sh run" {
				cur = &strings.Builder{}
			}
		case strings.HasPrefix(line, "```"):
			if cur != nil {
				blocks = append(blocks, cur.String())
			}
			in, cur = false, nil
		case cur != nil:
			cur.WriteString(line + "\n")
		}
	}
	require.NoError(t, sc.Err())
	require.False(t, in, "an unclosed block")
	return blocks
}

// claudeCalls reads the fake claude's log: one call a record, its
// arguments split by \x1f, calls by \x1e.
func claudeCalls(t *testing.T, log string) [][]string {
	b, err := os.ReadFile(log)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var calls [][]string
	for _, rec := range strings.Split(strings.TrimSuffix(string(b), "\x1e"), "\x1e") {
		calls = append(calls, strings.Split(strings.TrimSuffix(rec, "\x1f"), "\x1f"))
	}
	return calls
}

func goEnv(t *testing.T, key string) string {
	out, err := exec.Command("go", "env", key).Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}

// TestAgentsInstall follows AGENTS.md as an agent would: each "sh run"
// block, in order, as a command of its own, in a fresh HOME with a fake
// claude on PATH. The binary gets installed, registered at user scope with
// its full path, and self-tested, and nothing under ~/.claude is written.
func TestAgentsInstall(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("installs the binary")
	}
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	blocks := runBlocks(t, filepath.Join(root, "AGENTS.md"))
	require.GreaterOrEqual(t, len(blocks), 4)

	dir := t.TempDir()
	home, fake := filepath.Join(dir, "home"), filepath.Join(dir, "fakebin")
	require.NoError(t, os.Mkdir(home, 0o700))
	require.NoError(t, os.Mkdir(fake, 0o755))
	log := filepath.Join(dir, "claude.log")
	require.NoError(t, os.WriteFile(filepath.Join(fake, "claude"), []byte(`#!/bin/sh
for a; do printf '%s\037' "$a"; done >> "$CLAUDE_LOG"
printf '\036' >> "$CLAUDE_LOG"
[ "$1 $2" = "mcp get" ] && exit "${CLAUDE_GET_STATUS:-1}"
exit 0
`), 0o755))
	goBin, err := exec.LookPath("go")
	require.NoError(t, err)
	py, err := exec.LookPath("python3")
	require.NoError(t, err)
	// The install builds static, as AGENTS.md says (never with -race, which
	// needs cgo); tests/all.sh builds it so beside the tests, so that the
	// build cache may serve it.
	goflags := "-mod=readonly"
	env := []string{"HOME=" + home, "CLAUDE_LOG=" + log, "LANG=C.UTF-8", "TMPDIR=" + os.TempDir(),
		"PATH=" + strings.Join([]string{fake, filepath.Dir(goBin), filepath.Dir(py), "/usr/bin", "/bin"}, ":"),
		// The machine's build and module caches, so nothing is fetched;
		// the install itself lands in the fresh HOME.
		"GOCACHE=" + goEnv(t, "GOCACHE"), "GOMODCACHE=" + goEnv(t, "GOMODCACHE"), "GOTOOLCHAIN=local",
		"GOPATH=" + filepath.Join(home, "go"), "GOFLAGS=" + goflags}
	run := func(block string, extra ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", "--norc", "--noprofile", "-e", "-o", "pipefail", "-c", block)
		cmd.Dir, cmd.Env = root, append(append([]string(nil), env...), extra...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "block:\n%s\noutput:\n%s", block, out)
		return string(out)
	}
	var all strings.Builder
	for _, b := range blocks {
		all.WriteString(run(b))
	}
	out := all.String()
	bin := filepath.Join(home, "go", "bin", "replhub")
	assert.Contains(t, out, "installed: "+bin)
	assert.Contains(t, out, "self-test: PASS")
	assert.Equal(t, [][]string{
		{"mcp", "get", "replhub"},
		{"mcp", "add", "--scope", "user", "replhub", "--", bin, "mcp"},
	}, claudeCalls(t, log))
	for _, p := range []string{".claude", ".claude.json"} {
		_, err := os.Stat(filepath.Join(home, p))
		assert.True(t, os.IsNotExist(err), "~/%s was written", p)
	}

	// Run again with replhub registered already: it is left alone.
	require.NoError(t, os.Remove(log))
	var register string
	for _, b := range blocks {
		if strings.Contains(b, "claude mcp add") {
			register = b
		}
	}
	out = run(register, "CLAUDE_GET_STATUS=0")
	assert.Contains(t, out, "ask the person before replacing it")
	assert.Equal(t, [][]string{{"mcp", "get", "replhub"}, {"mcp", "get", "replhub"}}, claudeCalls(t, log))
}
