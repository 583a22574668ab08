package cli

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/replhub/replhub/cmd/replhub/cli/cmdenv"
)

func TestSwapCommandParsing(t *testing.T) {
	out, _, code := run(t, "", "--help")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "  swap ")
	_, errs, code := run(t, "", "swap", "a", "b")
	assert.Equal(t, cmdenv.ExitFailure, code)
	assert.Contains(t, errs, "accepts at most 1 arg(s)")
	out, _, code = run(t, "", "swap", "--help")
	assert.Equal(t, 0, code)
	for _, f := range []string{"--force", "--json", "swap_after_hours"} {
		assert.Contains(t, out, f)
	}
}

func TestQueryCommandsParsing(t *testing.T) {
	out, _, code := run(t, "", "--help")
	assert.Equal(t, 0, code)
	for _, c := range []string{"  vars ", "  inspect ", "  complete ", "  reset "} {
		assert.Contains(t, out, c)
	}
	_, errs, code := run(t, "", "inspect", "a")
	assert.Equal(t, cmdenv.ExitFailure, code)
	assert.Contains(t, errs, "accepts 2 arg(s)")
	_, errs, code = run(t, "", "vars", "a", "--wait", "-1")
	assert.Equal(t, cmdenv.ExitFailure, code)
	assert.Contains(t, errs, "--wait must be between 0 and 600 seconds")
	out, _, code = run(t, "", "reset", "--help")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "--keep-imports")
	assert.NotContains(t, out, "--wait", "reset never waits")
}
