package rawio

import (
	"os"
	"syscall"
)

// A File is an *os.File whose Write and WriteAt the scheduler does not
// hear of, where the file is on a local file system (see localFS): the
// hub writes a session's live record and transcript at every cell, and
// each write woke the runtime's monitor thread. A write to a local file
// does not wait for a device, only for the kernel's page cache (under
// memory pressure, for its writeback: milliseconds); one to a network
// file system may wait for a server, and stays an ordinary system call.
type File struct {
	*os.File
	rc syscall.RawConn // nil: the file's own writes
}

// NewFile returns f with raw writes where its file system allows them.
func NewFile(f *os.File) *File {
	rf := &File{File: f}
	rc, err := f.SyscallConn()
	if err != nil {
		return rf
	}
	local := false
	if rc.Control(func(fd uintptr) { local = localFS(fd) }) == nil && local {
		rf.rc = rc
	}
	return rf
}

// Write writes all of p at the file's offset (or its end, when opened
// with O_APPEND).
func (f *File) Write(p []byte) (int, error) {
	if f.rc == nil {
		return f.File.Write(p)
	}
	return f.raw("write", p, func(fd uintptr, b []byte) (int, syscall.Errno) { return Write(fd, b) })
}

// WriteAt writes all of p at off.
func (f *File) WriteAt(p []byte, off int64) (int, error) {
	if f.rc == nil || off < 0 {
		return f.File.WriteAt(p, off)
	}
	return f.raw("write", p, func(fd uintptr, b []byte) (int, syscall.Errno) {
		n, errno := Pwrite(fd, b, off)
		off += int64(n)
		return n, errno
	})
}

func (f *File) raw(op string, p []byte, write func(uintptr, []byte) (int, syscall.Errno)) (int, error) {
	var (
		done  int
		errno syscall.Errno
	)
	err := f.rc.Control(func(fd uintptr) {
		for done < len(p) && errno == 0 {
			var n int
			n, errno = write(fd, p[done:])
			if n == 0 && errno == 0 {
				errno = syscall.EIO // a regular file takes some or says why
			}
			done += n
		}
	})
	if err == nil && errno != 0 {
		err = errno
	}
	if err != nil {
		return done, &os.PathError{Op: op, Path: f.Name(), Err: err}
	}
	return done, nil
}
