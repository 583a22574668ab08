package rawio

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Read is one read(2) of fd into p (not empty), again after EINTR, that
// the scheduler does not hear of: fd must be nonblocking.
func Read(fd uintptr, p []byte) (int, syscall.Errno) { return call(syscall.SYS_READ, fd, p, 0) }

// Write is one write(2) of p (not empty) to fd, again after EINTR, that
// the scheduler does not hear of: fd must be nonblocking.
func Write(fd uintptr, p []byte) (int, syscall.Errno) { return call(syscall.SYS_WRITE, fd, p, 0) }

// Pwrite is one pwrite(2) of p (not empty) to fd at off, again after
// EINTR, that the scheduler does not hear of.
func Pwrite(fd uintptr, p []byte, off int64) (int, syscall.Errno) {
	return call(syscall.SYS_PWRITE64, fd, p, off)
}

// call makes the system call trap on fd, p and (for pwrite) off.
func call(trap, fd uintptr, p []byte, off int64) (int, syscall.Errno) {
	for {
		n, _, e := syscall.RawSyscall6(trap, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)), uintptr(off), 0, 0)
		if e == 0 {
			return int(n), 0
		}
		if e != syscall.EINTR {
			return 0, e
		}
	}
}

// localFS says whether fd's file is on a file system of this machine's
// disks or memory, which no server can hold up.
func localFS(fd uintptr) bool {
	var st unix.Statfs_t
	if unix.Fstatfs(int(fd), &st) != nil {
		return false
	}
	switch uint32(st.Type) {
	case unix.EXT4_SUPER_MAGIC, unix.TMPFS_MAGIC, unix.BTRFS_SUPER_MAGIC, unix.XFS_SUPER_MAGIC,
		unix.OVERLAYFS_SUPER_MAGIC, unix.F2FS_SUPER_MAGIC, unix.BCACHEFS_SUPER_MAGIC:
		return true
	}
	return false
}
