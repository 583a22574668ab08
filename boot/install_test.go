package boot

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/replhub/replhub/internal/testbound"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Whatever is found in a boot file's place is replaced, never followed
// nor read without end: a FIFO (which would block the read for ever), a
// link to /dev/zero (which never ends), a longer file.
func TestInstallOddFiles(t *testing.T) {
	for name, put := range map[string]func(p string) error{
		"fifo":   func(p string) error { return syscall.Mkfifo(p, 0o600) },
		"zero":   func(p string) error { return os.Symlink("/dev/zero", p) },
		"longer": func(p string) error { return os.WriteFile(p, append(append([]byte(nil), Worker...), '\n'), 0o600) },
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "boot-"+Hash(), "worker.py")
			require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o700))
			require.NoError(t, put(p))
			var err error
			testbound.Within(t, 10*time.Second, "Install", func() { _, err = Install(dir) })
			require.NoError(t, err)
			fi, err := os.Lstat(p)
			require.NoError(t, err)
			assert.True(t, fi.Mode().IsRegular(), "%v", fi.Mode())
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			assert.Equal(t, Worker, b)
		})
	}
}
