// Package hublog keeps the hub's log under a size. The log is a file in
// the runtime folder, a tmpfs on most machines, that the hub appends to
// for as long as it runs, as do, through descriptors of their own, the
// hub's standard error and the command line's notes: nothing a session or
// a host makes the hub log, however often, may fill that folder. Past Max
// bytes the file is cut to its last lines (up to Keep bytes), after a line
// that says so; the descriptors that append to it go on at its new end.
package hublog

import (
	"bytes"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/replhub/replhub/internal/atomicfile"
)

const (
	// Max is the size past which the log is cut.
	Max = 8 << 20
	// Keep is how much of its end a cut keeps.
	Keep = 1 << 20
)

// Writer appends to the log at path, opened as f (to append), and cuts it
// past max bytes to its last keep.
type Writer struct {
	mu        sync.Mutex
	f         *os.File
	path      string
	size      int64 // the file's size at the last look, and what went since
	max, keep int64
}

// New is a Writer of the log at path, opened as f, with the bounds Max and
// Keep.
func New(f *os.File, path string) *Writer {
	return newWriter(f, path, Max, Keep)
}

func newWriter(f *os.File, path string, max, keep int64) *Writer {
	w := &Writer{f: f, path: path, max: max, keep: keep}
	if fi, err := f.Stat(); err == nil {
		w.size = fi.Size()
	}
	return w
}

// Write appends p, first cutting the log if p would take it past its
// bound.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.size+int64(len(p)) > w.max {
		w.cut()
	}
	n, err := w.f.Write(p)
	w.size += int64(n)
	return n, err
}

// cut truncates the log to its last lines, after a line that says so.
// Others' writes count too: the file's size is looked at first. A cut that
// fails leaves the log as it is, to be tried again at the next write.
func (w *Writer) cut() {
	fi, err := w.f.Stat()
	if err != nil {
		return
	}
	if w.size = fi.Size(); w.size <= w.max-w.keep {
		return // cut meanwhile by another hub's writer
	}
	var tail []byte
	if pfi, err := os.Stat(w.path); err == nil && os.SameFile(pfi, fi) {
		if tail, err = atomicfile.ReadTail(w.path, w.keep); err != nil {
			return
		}
	}
	// Else the log was removed (rm), or another file took its name: the
	// file that w writes to, which only it can reach, is cut to nothing.
	if i := bytes.IndexByte(tail, '\n'); i >= 0 {
		tail = tail[i+1:] // from a line's start
	}
	if err := w.f.Truncate(0); err != nil {
		return
	}
	head := fmt.Sprintf("time=%s level=INFO msg=\"the log passed %d MiB: it was cut to its last %d KiB\"\n",
		time.Now().Format(time.RFC3339Nano), w.max>>20, len(tail)>>10)
	n, _ := w.f.Write(append([]byte(head), tail...))
	w.size = int64(n)
}
