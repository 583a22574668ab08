package fds

import "golang.org/x/sys/unix"

const fdDir = "/proc/self/fd"

// markAllCloseOnExec marks fds 3 and up close-on-exec in one call where the
// kernel has close_range's CLOSE_RANGE_CLOEXEC (Linux 5.11), else one by one.
func markAllCloseOnExec() {
	if unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC) == nil {
		return
	}
	for _, fd := range open() {
		if fd > 2 {
			setCloseOnExec(fd, true)
		}
	}
}
