package remote

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skeema/knownhosts"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"

	"github.com/replhub/replhub/internal/testbound"
)

// The user's ssh files are read with care: a FIFO as ~/.ssh/config, as an
// Included file, as a key or as known_hosts is an error or a skipped key,
// never a dial that hangs; a link to a real file is followed.
func TestUserFilesThatAreNotFiles(t *testing.T) {
	home := t.TempDir()
	sshDir := filepath.Join(home, ".ssh")
	require.NoError(t, os.MkdirAll(filepath.Join(sshDir, "conf.d"), 0o700))
	fifo := filepath.Join(home, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))

	testbound.Within(t, 10*time.Second, "reading FIFOs", func() {
		require.NoError(t, os.Symlink(fifo, filepath.Join(sshDir, "config")))
		_, err := NewResolver(home, "me")
		assert.ErrorContains(t, err, "not a regular file")

		// An Included FIFO is warned about and passed over; the rest is used.
		require.NoError(t, os.Remove(filepath.Join(sshDir, "config")))
		real := filepath.Join(home, "dotfiles-ssh-config")
		require.NoError(t, os.WriteFile(real, []byte("Include conf.d/*\nHost lab\n  HostName 10.9.8.7\n"), 0o600))
		require.NoError(t, os.Symlink(real, filepath.Join(sshDir, "config")))
		require.NoError(t, os.Symlink(fifo, filepath.Join(sshDir, "conf.d", "pipe")))
		var warned []string
		old := Warnf
		Warnf = func(format string, a ...any) { warned = append(warned, format) }
		defer func() { Warnf = old }()
		r, err := NewResolver(home, "me")
		require.NoError(t, err)
		assert.Len(t, warned, 1)
		route, err := r.Resolve("lab", nil)
		require.NoError(t, err)
		assert.Equal(t, "me@10.9.8.7:22", route.Target().String(), "the linked config is read")

		auth := &AuthError{}
		keySigners(Hop{IdentityFiles: []string{fifo}}, Env{Home: home}, auth)
		require.Len(t, auth.Skipped, 1)
		assert.Contains(t, auth.Skipped[0], "not a regular file")

		_, _, err = hostKeyCallback(Hop{KnownHosts: []string{fifo}})
		assert.ErrorContains(t, err, "not a regular file")
		// UserKnownHostsFile /dev/null, with StrictHostKeyChecking no: no
		// host is known, and the new ones are forgotten.
		cb, _, err := hostKeyCallback(Hop{KnownHosts: []string{os.DevNull}, StrictHostKeyChecking: "no"})
		require.NoError(t, err)
		pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"))
		require.NoError(t, err)
		assert.NoError(t, cb("lab", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 22}, pub))
		// With the default strict checking, the refusal cannot offer a
		// line to add to /dev/null: it says what would work.
		cb, _, err = hostKeyCallback(Hop{KnownHosts: []string{os.DevNull}, StrictHostKeyChecking: "yes"})
		require.NoError(t, err)
		err = cb("lab", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 22}, pub)
		assert.ErrorContains(t, err, "keeps no key: set StrictHostKeyChecking accept-new")
		assert.NotContains(t, err.Error(), ">> /dev/null")
	})
}

// A known_hosts file is read once, as it was when it was opened and
// checked, at most maxKnownHosts bytes: the library reads a copy (on
// Linux in memory, sealed; elsewhere in $TMPDIR), which is gone once the
// callback is made, and its errors name the file by its path.
func TestKnownHostsAreReadOnceAsOpened(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	dir := t.TempDir()
	path := filepath.Join(dir, "known_hosts")
	pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"))
	require.NoError(t, err)
	line := knownhosts.Line([]string{"lab"}, pub) + "\n"
	require.NoError(t, os.WriteFile(path, []byte(line), 0o600))
	cb, _, err := hostKeyCallback(Hop{KnownHosts: []string{path}, StrictHostKeyChecking: "yes"})
	require.NoError(t, err)
	assert.NoError(t, cb("lab:22", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 22}, pub))
	left, _ := os.ReadDir(tmp)
	assert.Empty(t, left, "copies left behind")
	if runtime.GOOS == "linux" {
		// No folder is written to.
		t.Setenv("TMPDIR", filepath.Join(tmp, "missing"))
		cb, _, err := hostKeyCallback(Hop{KnownHosts: []string{path}, StrictHostKeyChecking: "yes"})
		require.NoError(t, err)
		assert.NoError(t, cb("lab:22", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 22}, pub))
		t.Setenv("TMPDIR", tmp)
	}

	// A file that grows past the bound after its size was checked.
	name, drop, err := copyKnownHosts(io.MultiReader(strings.NewReader(line), endless{[]byte(strings.Repeat("x", 1<<16))}), path)
	assert.ErrorContains(t, err, "more than")
	assert.Empty(t, name)
	assert.Nil(t, drop)
	left, _ = os.ReadDir(tmp)
	assert.Empty(t, left, "a copy left behind")
	name, drop, err = copyKnownHosts(strings.NewReader(line), path)
	require.NoError(t, err)
	got, err := os.ReadFile(name)
	require.NoError(t, err)
	assert.Equal(t, line, string(got))
	got, err = os.ReadFile(name) // read again from its start
	require.NoError(t, err)
	assert.Equal(t, line, string(got))
	fi, err := os.Stat(name)
	require.NoError(t, err)
	if runtime.GOOS == "linux" {
		// In memory, sealed: no one changes it between the library's reads.
		assert.True(t, strings.HasPrefix(name, "/proc/self/fd/"), name)
		if w, err := os.OpenFile(name, os.O_WRONLY, 0); err == nil {
			_, err = w.Write([]byte("x"))
			w.Close()
			assert.Error(t, err, "a write to the sealed copy")
		}
	} else {
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	}
	drop()
	left, _ = os.ReadDir(tmp)
	assert.Empty(t, left, "a copy left behind")

	// A copy in $TMPDIR is this user's alone, and its drop removes it.
	name, drop, err = tempCopy([]byte(line))
	require.NoError(t, err)
	fi, err = os.Stat(name)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	drop()
	_, err = os.Stat(name)
	assert.True(t, os.IsNotExist(err), "%v", err)

	bad := filepath.Join(dir, "bad_known_hosts")
	require.NoError(t, os.WriteFile(bad, []byte("lab ssh-ed25519 not-base64\n"), 0o600))
	_, _, err = hostKeyCallback(Hop{KnownHosts: []string{bad}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), bad)
	assert.NotContains(t, err.Error(), "/fd/")
}

// The copies' names may start one another (/proc/self/fd/5 and
// /proc/self/fd/50): an error names each file by its own path.
func TestKnownHostsErrorsNameTheirOwnFile(t *testing.T) {
	real := map[string]string{"/proc/self/fd/5": "/home/me/.ssh/known_hosts", "/proc/self/fd/50": "/etc/ssh/ssh_known_hosts"}
	for i := 0; i < 20; i++ { // the map's order changes from run to run
		assert.Equal(t, "/etc/ssh/ssh_known_hosts:3: illegal base64 data; /home/me/.ssh/known_hosts: no valid entries",
			realNames("/proc/self/fd/50:3: illegal base64 data; /proc/self/fd/5: no valid entries", real))
	}
}
