package cli

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSwapCommandParsing(t *testing.T) {
	out, _, code := run(t, "", "--help")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "  swap ")
	_, errs, code := run(t, "", "swap", "a", "b")
	assert.Equal(t, ExitFailure, code)
	assert.Contains(t, errs, "accepts at most 1 arg(s)")
	out, _, code = run(t, "", "swap", "--help")
	assert.Equal(t, 0, code)
	for _, f := range []string{"--force", "--json", "swap_after_hours"} {
		assert.Contains(t, out, f)
	}
}
