package hub

import (
	"os"

	"golang.org/x/sys/unix"
)

// awaitExit returns once process pid (a child of the hub's) has exited,
// without reaping it. It waits on a pidfd through the runtime's poller,
// so that a waiting session holds no thread: the runtime's own wait
// blocks one thread per child in waitid, fifty threads for fifty
// sessions. Where a pidfd cannot be had or polled (PIDFD_NONBLOCK needs
// Linux 5.10) it returns at once, and the caller's wait blocks as before.
func awaitExit(pid int) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	// A pidfd reads as ready once its process has exited. The poller may
	// call again after a wake-up that was not that; a failure to poll ends
	// the wait here.
	rc.Read(func(fd uintptr) bool {
		p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(p, 0)
		return err != nil && err != unix.EINTR || n > 0
	})
}
