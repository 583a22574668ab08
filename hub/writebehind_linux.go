package hub

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback asks the kernel to begin writing [off, off+n) of f to disk
// now, without waiting for it. A transfer calls it as chunks land, so the
// disk works while the network does and the fsync at the end finds little
// left to write: the file's throughput becomes the slower of the two rather
// than their sum.
func startWriteback(f *os.File, off, n int64) {
	unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}
