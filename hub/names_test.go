package hub

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheckName(t *testing.T) {
	for _, ok := range []string{"a", "chirp", "A.b-c_9", strings.Repeat("x", 64)} {
		assert.NoError(t, checkName(ok), ok)
	}
	for _, bad := range []string{"", ".", "..", "a b", "a/b", strings.Repeat("x", 65), "é", "a\n"} {
		assert.Error(t, checkName(bad), bad)
	}
}

func TestLookPath(t *testing.T) {
	dir := t.TempDir()
	p, err := lookPath("sh", "/nonexistent:"+dir+":/bin:/usr/bin")
	require.NoError(t, err)
	assert.True(t, strings.HasSuffix(p, "/sh"))
	_, err = lookPath("no-such-binary-here", dir)
	assert.Error(t, err)
	_, err = lookPath(dir, "")
	assert.EqualError(t, err, "not an executable file")
}
