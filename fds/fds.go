// Package fds keeps the file descriptors a process inherited from reaching
// the processes it starts.
//
// A process may be handed open fds beyond 0, 1 and 2 that are not marked
// close-on-exec: a shell's `replhub exec x 1 3>pipe`, or a program that
// left a pipe's write end inheritable. os/exec does not close them in a
// child, so without care they would pass from the client into the hub and
// from the hub into every worker, and a pipe held that way would never see
// EOF. Go itself opens every fd close-on-exec (the runtime's, os.Open's,
// os.Pipe's, net's), so an fd above 2 without that flag is one the process
// inherited.
//
// It does not own how a child's stdin, stdout and stderr are set up (the
// callers do, with os/exec).
package fds

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Name is fd's entry in the folder of the process's open fds
// (/proc/self/fd on Linux, /dev/fd elsewhere): a name that opens the file
// fd has open, whatever its path names by then.
func Name(fd uintptr) string { return fdDir + "/" + strconv.FormatUint(uint64(fd), 10) }

// probeMax is the highest fd probed when the fd folder cannot be listed.
const probeMax = 1023

// Inherited lists the fds above 2 that are open without close-on-exec. In
// a Go program that has not opened an inheritable fd itself (with
// syscall.Pipe, say), these are the fds it inherited.
func Inherited() []int {
	var fds []int
	for _, fd := range open() {
		if fd <= 2 {
			continue
		}
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err == nil && flags&unix.FD_CLOEXEC == 0 {
			fds = append(fds, fd)
		}
	}
	return fds
}

// MarkCloseOnExec marks every inherited fd (see Inherited) close-on-exec,
// so that a child started now gets only what it is given explicitly; undo
// clears the mark again on those fds. A caller that starts a child between
// the two keeps its own inheritable fds from it; the process's own use of
// them is unchanged.
func MarkCloseOnExec() (undo func()) {
	fds := Inherited()
	var marked []int
	for _, fd := range fds {
		if setCloseOnExec(fd, true) == nil {
			marked = append(marked, fd)
		}
	}
	return func() {
		for _, fd := range marked {
			setCloseOnExec(fd, false)
		}
	}
}

// CloseInherited closes every inherited fd (see Inherited) and returns
// them, for a long-lived process (the hub) that never uses what it was
// handed: no child it starts may hold them, and neither should it. The Go
// runtime's own fds (its epoll and eventfd, the cgroup files it reads for
// GOMAXPROCS) are close-on-exec, so they are left alone. It then marks
// every fd above 2 close-on-exec, which changes nothing when the listing
// worked and keeps the rest from children when it did not.
//
// Call it before the process opens an inheritable fd of its own on
// purpose; the first thing in main is simplest.
func CloseInherited() []int {
	fds := Inherited()
	for _, fd := range fds {
		unix.Close(fd)
	}
	markAllCloseOnExec()
	return fds
}

func setCloseOnExec(fd int, on bool) error {
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	if err != nil {
		return err
	}
	if on {
		flags |= unix.FD_CLOEXEC
	} else {
		flags &^= unix.FD_CLOEXEC
	}
	_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFD, flags)
	return err
}

// open lists the process's open fds. The listing's own fd is among them,
// closed by the time the caller looks at it; fcntl on it then fails (or
// finds an fd opened since, which Go opened close-on-exec), so it is
// harmless. Without the listing (no /proc), fds 0 to probeMax are probed.
func open() []int {
	d, err := os.Open(fdDir)
	if err != nil {
		var fds []int
		for fd := 0; fd <= probeMax; fd++ {
			if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil {
				fds = append(fds, fd)
			}
		}
		return fds
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	fds := make([]int, 0, len(names))
	for _, n := range names {
		if fd, err := strconv.Atoi(n); err == nil {
			fds = append(fds, fd)
		}
	}
	return fds
}
