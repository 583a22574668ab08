// Package atomicfile replaces a file whole, so that a reader sees the old
// contents or the new, never a part: the data goes to a temporary file in
// the same folder, which is then renamed over the file. It owns nothing
// else: what to write and when is the caller's.
package atomicfile

import (
	"io/fs"
	"os"
	"path/filepath"
)

// WriteFile replaces the file at path with data. The file gets perm, or,
// when perm is 0, the mode of the file it replaces (0600 for a new one).
// On error the temporary file is removed and path is as it was; the error
// is the *fs.PathError or *os.LinkError of the step that failed.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	return write(path, data, perm, false)
}

// WriteFileSync is WriteFile that flushes the data to disk before the
// rename, so that a crash leaves the old file or the new one whole.
func WriteFileSync(path string, data []byte, perm fs.FileMode) error {
	return write(path, data, perm, true)
}

func write(path string, data []byte, perm fs.FileMode, sync bool) error {
	if perm == 0 {
		perm = 0o600
		if fi, err := os.Stat(path); err == nil {
			perm = fi.Mode().Perm()
		}
	}
	// Named after the file, and never ending as it does: a leftover from
	// a crash is recognisable, and a reader that lists the folder by
	// suffix passes it over.
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}
