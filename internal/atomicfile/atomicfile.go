// Package atomicfile replaces a file whole, so that a reader sees the old
// contents or the new, never a part: the data goes to a temporary file in
// the same folder, which is then renamed over the file. It reads such a
// file back (ReadFile) without trusting what is there now, and a user's
// own files (ReadUserFile, ReadTail) with the same care. It owns nothing
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
	"time"
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
	return readRegular(path, max, false)
}

// ReadUserFile is ReadFile for a file that a user keeps, such as
// config.json or ~/.ssh/config: it follows a symbolic link, as a user who
// links their dotfiles from elsewhere expects, and reads /dev/null, where
// users point a setting to turn it off, as empty. It refuses the rest as
// ReadFile does.
func ReadUserFile(path string, max int64) ([]byte, error) {
	return readRegular(path, max, true)
}

// ReadTail returns the last n bytes of a user's file that grows, such as
// a log, following a link and refusing what is not a regular file.
func ReadTail(path string, n int64) ([]byte, error) {
	f, fi, err := openRegular(path, os.O_RDONLY, true)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	off := max(fi.Size()-n, 0)
	b := make([]byte, fi.Size()-off)
	k, err := f.ReadAt(b, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b[:k], nil
}

// OpenAppend opens a log to append to, made 0600 when missing, and
// refuses anything but a regular file or /dev/null: opened for writing, a
// FIFO that nobody reads would block for good.
func OpenAppend(path string) (*os.File, error) {
	f, _, err := openRegular(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, true)
	if err != nil {
		return nil, err
	}
	if err := syscall.SetNonblock(int(f.Fd()), false); err != nil { // the hub inherits it
		f.Close()
		return nil, err
	}
	return f, nil
}

var errNotRegular = errors.New("not a regular file")

// OpenUserFile opens a user's file for reading as ReadUserFile reads it:
// following a link, without blocking on a FIFO, and refusing what is not
// a regular file or /dev/null (IsNotRegular); with its FileInfo.
func OpenUserFile(path string) (*os.File, fs.FileInfo, error) {
	return openRegular(path, os.O_RDONLY, true)
}

// IsNotRegular says whether err is a refusal of something that is not a
// regular file (a FIFO, a device, a folder).
func IsNotRegular(err error) bool { return errors.Is(err, errNotRegular) }

// openRegular opens path with flags, without blocking on a FIFO nor
// taking a terminal as the process's own, and returns it with its
// FileInfo when it is a regular file, or, for a user's file, /dev/null.
// A user's file may be reached through a link; the hub's own may not.
func openRegular(path string, flags int, user bool) (*os.File, fs.FileInfo, error) {
	if !user {
		flags |= syscall.O_NOFOLLOW
	}
	writing := flags&(os.O_WRONLY|os.O_RDWR) != 0
	f, err := os.OpenFile(path, flags|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0o600)
	switch {
	case !user && errors.Is(err, syscall.ELOOP):
		return nil, nil, &fs.PathError{Op: "open", Path: path, Err: errors.New("a symbolic link, not a file")}
	case writing && errors.Is(err, syscall.ENXIO): // a FIFO without a reader
		return nil, nil, &fs.PathError{Op: "open", Path: path, Err: errNotRegular}
	case err != nil:
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() && !(user && isDevNull(fi)) {
		op := "read"
		if writing {
			op = "open"
		}
		err = &fs.PathError{Op: op, Path: path, Err: errNotRegular}
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// isDevNull says whether fi is /dev/null's.
func isDevNull(fi fs.FileInfo) bool {
	null, err := os.Stat(os.DevNull)
	return err == nil && os.SameFile(fi, null)
}

// IsDevNull says whether path is /dev/null, or a link to it.
func IsDevNull(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && isDevNull(fi)
}

// readWait bounds the read of a file that only says it is regular and
// waits for what it gives (/proc/kmsg, a tracing pipe, through a link):
// such a file is read through the runtime's poller, where a deadline
// holds (a regular file's read never waits, and takes none).
var readWait = 5 * time.Second

func readRegular(path string, max int64, user bool) ([]byte, error) {
	f, fi, err := openRegular(path, os.O_RDONLY, user)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi.Size() > max {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%d bytes, more than %d", fi.Size(), max)}
	}
	// Read to max+1, not to the size: the file may grow meanwhile.
	b, err := readAtMost(f, path, max+1)
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("more than %d bytes", max)}
	}
	return b, nil
}

// ReadUserHead is the first n bytes of a user's file, or all of it when
// it holds fewer: a file read as ReadUserFile reads one (a link followed,
// only a regular file, a file that waits for data bounded), of any size.
func ReadUserHead(path string, n int64) ([]byte, error) {
	f, _, err := openRegular(path, os.O_RDONLY, true)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAtMost(f, path, n)
}

// readAtMost reads f, at path, to its end or n bytes, within readWait
// where f is one that waits for what it gives.
func readAtMost(f *os.File, path string, n int64) ([]byte, error) {
	f.SetReadDeadline(time.Now().Add(readWait)) // ErrNoDeadline for a regular file
	b, err := io.ReadAll(io.LimitReader(f, n))
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf(
			"it gave no end within %s: a file that waits for what it gives (such as /proc/kmsg) is not read", readWait)}
	}
	return b, err
}

// NotToPush says why the file at path, of fi, is no push's source: a
// folder, or anything but a regular file (a FIFO would block its reader
// for good, a device never end); nil when it is one.
func NotToPush(path string, fi fs.FileInfo) error {
	switch {
	case fi.IsDir():
		return fmt.Errorf("%s is a folder: push one file at a time (tar it first)", path)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s is %s, not a regular file: push copies regular files only", path, Kind(fi.Mode()))
	}
	return nil
}

// NotToReplace says why the file at path, of fi, is no pull's
// destination: a folder, or anything but a regular file, which the pull's
// rename would replace by one; nil when it is one.
func NotToReplace(path string, fi fs.FileInfo) error {
	switch {
	case fi.IsDir():
		return fmt.Errorf("%s is a folder: give the file's own path", path)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s is %s, not a regular file: only a regular file is replaced", path, Kind(fi.Mode()))
	}
	return nil
}

// Kind names what mode is, for a message: "a named pipe", "a folder", "a
// character device" and so on.
func Kind(mode fs.FileMode) string {
	switch {
	case mode.IsRegular():
		return "a regular file"
	case mode.IsDir():
		return "a folder"
	case mode&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case mode&fs.ModeSocket != 0:
		return "a socket"
	case mode&fs.ModeCharDevice != 0:
		return "a character device"
	case mode&fs.ModeDevice != 0:
		return "a block device"
	case mode&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "not a file"
}
