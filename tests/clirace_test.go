package tests

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/tests/hubtest"
)

// The CLI's own concurrent code (its Ctrl-C handling, a transfer's
// progress, a call through cobra and the client package) run race-built:
// the other tests run a plain CLI, for speed, against a race-built hub.
// A race it reports fails the test at cleanup (hubtest's race logs).
func TestCLIRaceBuilt(t *testing.T) {
	if !hubtest.Race {
		t.Skip("the CLI is race-built only under -race")
	}
	t.Parallel()
	e := hubtest.Start(t)
	e.Bin = e.HubBin
	ok(t, e.Run("exec", "c", "import time, sys", "-t", "60"))
	res, r := jsonResult(t, e, "exec", "--json", "c", "print('out'); print('err', file=sys.stderr); 6 * 7")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Equal(t, "out\n", res.Stdout)

	src := filepath.Join(t.TempDir(), "src.bin")
	require.NoError(t, os.WriteFile(src, bytes.Repeat([]byte("x"), 20<<20), 0o600))
	dest := filepath.Join(t.TempDir(), "dest.bin")
	ok(t, e.Run("push", "c", src, dest))
	back := filepath.Join(t.TempDir(), "back.bin")
	ok(t, e.Run("pull", "c", dest, back))
	fi, err := os.Stat(back)
	require.NoError(t, err)
	assert.Equal(t, int64(20<<20), fi.Size())
	ok(t, e.Run("sessions", "--json"))
	ok(t, e.Run("vars", "c"))

	// Ctrl-C through cobra's exec (a flag): the first interrupts the cell.
	code, stdout, stderr := execCtrlC(t, e, "c", "-t", "90")
	assert.Equal(t, 1, code, "stdout %s stderr %s", stdout, stderr)
	assert.Contains(t, stdout, "KeyboardInterrupt")
	assert.Contains(t, stderr, "[interrupting session 'c'")
	ok(t, e.Run("kill", "c"))
}
