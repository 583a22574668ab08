package hub

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/wire"
)

func TestCheckName(t *testing.T) {
	for _, ok := range []string{"a", "chirp", "A.b-c_9", strings.Repeat("x", 64), "probe@lab-7", "p@" + strings.Repeat("h", 128)} {
		assert.NoError(t, checkName(ok), ok)
	}
	for _, bad := range []string{"", ".", "..", "a b", "a/b", strings.Repeat("x", 65), "é", "a\n",
		"a@", "@b", "a@b@c", "..@b", "a@..", "a@b/c", "a@" + strings.Repeat("h", 129)} {
		assert.Error(t, checkName(bad), bad)
	}
}

func TestLookPath(t *testing.T) {
	dir := t.TempDir()
	p, err := lookPath("sh", "/nonexistent:"+dir+":/bin:/usr/bin", "")
	require.NoError(t, err)
	assert.True(t, strings.HasSuffix(p, "/sh"))
	_, err = lookPath("no-such-binary-here", dir, "")
	assert.Error(t, err)
	_, err = lookPath(dir, "", "")
	assert.EqualError(t, err, "not an executable file")
	// A relative path is the caller's, in its folder.
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "v", "bin"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "v", "bin", "python"), nil, 0o755))
	p, err = lookPath("./v/bin/python", "", dir)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "v", "bin", "python"), p)
	_, err = lookPath("v/bin/python", "", "/nonexistent")
	assert.EqualError(t, err, "not found")
}

func TestImpliedHost(t *testing.T) {
	req := wire.Request{Name: "probe@lab-7"}
	require.NoError(t, impliedHost(&req))
	assert.Equal(t, "lab-7", req.Host)
	req = wire.Request{Name: "probe@lab-7", Host: "lab-7"}
	assert.NoError(t, impliedHost(&req))
	req = wire.Request{Name: "probe@lab-7", Host: "lab-8"}
	assert.ErrorContains(t, impliedHost(&req), "runs on lab-7, as its name says, not lab-8")
	req = wire.Request{Name: "plain"}
	require.NoError(t, impliedHost(&req))
	assert.Empty(t, req.Host)
}

func TestFanLinkID(t *testing.T) {
	for _, id := range []int64{1, 2, 77, 1 << 40} {
		for _, i := range []int{0, 1, maxHosts - 1} {
			link := fanLinkID(id, i)
			assert.Less(t, link, int64(0))
			got, ok := fanLinkOf(link)
			assert.True(t, ok)
			assert.Equal(t, id, got)
		}
	}
	_, ok := fanLinkOf(5)
	assert.False(t, ok)
}
