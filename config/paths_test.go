package config

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFromEnv(t *testing.T) {
	env := map[string]string{"HOME": "/home/me"}
	p, err := FromEnv(func(k string) string { return env[k] })
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(os.TempDir(), fmt.Sprintf("replhub-%d", os.Getuid())), p.Runtime)
	assert.False(t, p.RuntimeFromXDG)
	assert.Equal(t, "/home/me/.local/state/replhub/"+Hostname(), p.State)
	assert.Equal(t, "/home/me/.config/replhub", p.Config)

	env["XDG_RUNTIME_DIR"], env["XDG_STATE_HOME"], env["XDG_CONFIG_HOME"] = "/run/user/1", "/s", "/c"
	p, err = FromEnv(func(k string) string { return env[k] })
	require.NoError(t, err)
	assert.Equal(t, "/run/user/1/replhub", p.Runtime)
	assert.Equal(t, "/run/user/1/replhub/hub.sock", p.Socket())
	assert.Equal(t, "/run/user/1/replhub/hub.log", p.Log())
	assert.Equal(t, "/s/replhub/"+Hostname()+"/chirp.py", p.Transcript("chirp"))
	assert.Equal(t, "/s/replhub/"+Hostname()+"/dead", p.DeadDir())
	assert.Equal(t, "/s/replhub/"+Hostname()+"/live", p.LiveDir())
	assert.Equal(t, "/c/replhub", p.Config)
}

func TestGetenv(t *testing.T) {
	env := []string{"A=1", "B=x=y", "A=2", "NOEQUALS"}
	assert.Equal(t, "2", Getenv(env, "A"), "the last setting wins")
	assert.Equal(t, "x=y", Getenv(env, "B"))
	assert.Equal(t, "", Getenv(env, "NOEQUALS"))
	assert.Equal(t, "", Getenv(nil, "A"))
}

// safeName replaces what the state folder's name may not hold, exactly as
// the regexp it stands in for did, so that no existing folder moves.
func FuzzSafeName(f *testing.F) {
	unsafe := regexp.MustCompile(`[^A-Za-z0-9._-]`)
	for _, s := range []string{"vm", "lab-7.example.org", "my host", "hôte", "a/b\\c", "\xff\xfeok", "", "_.-"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := safeName(s), unsafe.ReplaceAllString(s, "_"); got != want {
			t.Fatalf("safeName(%q) = %q, the regexp gives %q", s, got, want)
		}
	})
}
