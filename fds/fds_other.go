//go:build !linux

package fds

const fdDir = "/dev/fd"

// markAllCloseOnExec marks fds 3 and up close-on-exec, one by one.
func markAllCloseOnExec() {
	for _, fd := range open() {
		if fd > 2 {
			setCloseOnExec(fd, true)
		}
	}
}
