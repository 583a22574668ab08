package hub

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/wire"
)

// TestMemberRequestPassword: each session of a group gets the password
// as a single session would, empty included, in a copy of its own.
func TestMemberRequestPassword(t *testing.T) {
	for _, tc := range []struct {
		name string
		pw   []byte
	}{
		{"none", nil},
		{"empty", []byte{}},
		{"given", []byte("p@ss w0rd")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := wire.Request{Op: wire.OpExec, Name: "ops", Hosts: "web,db", Sudo: true, Password: tc.pw}
			sub := memberRequest(req, "web")
			assert.Equal(t, "ops@web", sub.Name)
			assert.Equal(t, "web", sub.Host)
			assert.Empty(t, sub.Hosts)
			assert.True(t, sub.Sudo)
			assert.Equal(t, tc.pw == nil, sub.Password == nil, "a password, even empty, stays one; none stays none")
			assert.Equal(t, string(tc.pw), string(sub.Password))
			if len(tc.pw) > 0 {
				sub.Password[0] = 0
				assert.Equal(t, byte('p'), tc.pw[0], "zeroing one host's copy leaves the others")
			}
		})
	}
}

// TestLoadConfigCarried: a start under a group's context takes the
// config.json the group read, and reads none of its own.
func TestLoadConfigCarried(t *testing.T) {
	p := testPaths(t)
	h := testHub(t, p)
	require.NoError(t, os.MkdirAll(filepath.Dir(p.ConfigFile()), 0o755))
	require.NoError(t, os.WriteFile(p.ConfigFile(), []byte(`{"sudo": "nopasswd"}`), 0o644))
	read, err := h.loadConfig(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "nopasswd", read.Sudo)

	require.NoError(t, os.WriteFile(p.ConfigFile(), []byte(`{"sudo": `), 0o644))
	_, err = h.loadConfig(context.Background())
	assert.Error(t, err, "read anew without a group's")
	cfg, err := h.loadConfig(withConfig(context.Background(), read))
	require.NoError(t, err)
	assert.Same(t, read, cfg, "the group's, not the file as it is now")
}

// A group that failed on every host is not remembered, and the kill of
// a remembered group with no session left forgets it, with an answer that
// is no error.
func TestGroupsWithoutSessions(t *testing.T) {
	h := reachHub(t, map[string]string{"kept@lab-2": "lab-2"})
	h.groups["ghost"] = groupRecord{hosts: []string{"lab-1"}}
	h.forgetIfEmpty("ghost", []string{"lab-1"})
	assert.NotContains(t, h.groups, "ghost")

	h.groups["kept"] = groupRecord{hosts: []string{"lab-1", "lab-2"}}
	h.forgetIfEmpty("kept", []string{"lab-1", "lab-2"})
	assert.Contains(t, h.groups, "kept", "one of its sessions is there")

	h.groups["gone"] = groupRecord{hosts: []string{"lab-[1-3]"}}
	msg, err := h.fanKill("gone", []string{"lab-1", "lab-2", "lab-3"})
	require.NoError(t, err)
	assert.Equal(t, "group 'gone' had no session left (on lab-[1-3]); it is forgotten", msg)
	assert.NotContains(t, h.groups, "gone")
	_, err = h.fanKill("gone", []string{"lab-1"})
	assert.Error(t, err, "a group it does not know is no session")
}
