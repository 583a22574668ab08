// Package atomicfile replaces a file whole, so that a reader sees the old
// contents or the new, never a part: the data goes to a temporary file in
// the same folder, which is then renamed over the file; and reads such a
// file back (ReadFile) without trusting what is there now. It owns nothing
// else: what to write and when is the caller's.
package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
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

// ReadFile reads back a file that WriteFile wrote, of at most max bytes.
// What may have taken its place since (a FIFO, which would block the read
// for ever, a device such as /dev/zero, which never ends, a link, a file
// grown past max) is not read: the error, a *fs.PathError, says what it
// is, and wraps fs.ErrNotExist when there is nothing at path.
func ReadFile(path string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			err = &fs.PathError{Op: "open", Path: path, Err: errors.New("a symbolic link, not a file")}
		}
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "read", Path: path, Err: errors.New("not a regular file")}
	}
	if fi.Size() > max {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%d bytes, more than %d", fi.Size(), max)}
	}
	// Read to max+1, not to the size: the file may grow meanwhile.
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("more than %d bytes", max)}
	}
	return b, nil
}
