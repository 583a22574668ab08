package tests

import (
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/tests/hubtest"
)

// Every replhub process, a one-line CLI call too, runs the init of every
// package in the binary: what only the hub, the MCP server or a remote
// start needs (a compiled pattern, an embedded file's hash) is made at its
// first use, so that each of replhub's packages allocates next to nothing
// at init. Counts, not times: they do not depend on the machine's load.
func TestCLIInitIsCheap(t *testing.T) {
	cmd := exec.Command(hubtest.Binary(t), "--version")
	cmd.Env = append(cmd.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	line := regexp.MustCompile(`^init (github\.com/replhub/replhub/\S+) @.*, (\d+) bytes, (\d+) allocs$`)
	seen := 0
	for _, l := range strings.Split(string(out), "\n") {
		m := line.FindStringSubmatch(strings.TrimSpace(l))
		if m == nil {
			continue
		}
		seen++
		bytes, _ := strconv.Atoi(m[2])
		allocs, _ := strconv.Atoi(m[3])
		assert.LessOrEqual(t, allocs, 100, "%s allocates %d times at init: build it at its first use (sync.OnceValue, internal/lazyre)", m[1], allocs)
		assert.LessOrEqual(t, bytes, 16<<10, "%s allocates %d bytes at init: build it at its first use", m[1], bytes)
	}
	assert.Greater(t, seen, 3, "no init trace of replhub's packages in:\n%s", out)
}
