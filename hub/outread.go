package hub

import (
	"io"
	"os"
	"sync"
	"syscall"
)

// The buffers a worker's output is read into. A session borrows one for a
// read and gives it back: fifty sessions holding a big buffer each would be
// most of the hub's heap, and fifty starting at once would make as many.
// A read takes a small buffer unless the one before brought as much as a
// small buffer holds: then output is flooding (a worker's pipe holds
// 1 MiB), and big reads keep the flood cheap.
const (
	smallRead = 4 << 10
	bigRead   = 256 << 10
)

var (
	smallBufs = sync.Pool{New: func() any { b := make([]byte, smallRead); return &b }}
	bigBufs   = sync.Pool{New: func() any { b := make([]byte, bigRead); return &b }}
)

// outputReader reads a session's output stream.
type outputReader struct {
	r  io.Reader
	rc syscall.RawConn // r's, where the runtime polls it (a local pipe)
	// big says the last read brought a small buffer's worth or more (of
	// a reader that is not polled: filled its buffer).
	big bool
}

func newOutputReader(r io.Reader) *outputReader {
	o := &outputReader{r: r}
	if f, ok := r.(*os.File); ok {
		o.rc, _ = f.SyscallConn()
	}
	return o
}

func (o *outputReader) borrow() *[]byte {
	if o.big {
		return bigBufs.Get().(*[]byte)
	}
	return smallBufs.Get().(*[]byte)
}

func giveBack(b *[]byte) {
	if len(*b) == bigRead {
		bigBufs.Put(b)
	} else {
		smallBufs.Put(b)
	}
}

// read hands take the stream's next bytes (take must not keep them) and
// returns the stream's error, io.EOF at its end. A polled stream is read
// once it has bytes, so that no buffer is held while it waits; another
// (an ssh channel) holds a small one while it waits. An adopted worker's
// output comes in frames: its stream only ends, and holds none.
func (o *outputReader) read(take func([]byte)) error {
	if end, ok := o.r.(outputEnd); ok {
		<-end.eof
		return io.EOF
	}
	if o.rc == nil {
		b := o.borrow()
		defer giveBack(b)
		n, err := o.r.Read(*b)
		o.took(take, *b, n)
		// This reader holds its buffer while it waits: a big one only
		// while reads fill it, so that it waits with a small one once a
		// flood is drained.
		o.big = n == len(*b)
		return err
	}
	var (
		b    *[]byte
		n    int
		rerr error
	)
	err := o.rc.Read(func(fd uintptr) bool {
		b = o.borrow()
		for {
			n, rerr = syscall.Read(int(fd), *b)
			if rerr != syscall.EINTR {
				break
			}
		}
		if rerr == syscall.EAGAIN {
			giveBack(b)
			b = nil
			return false // wait until it is readable
		}
		return true
	})
	if b != nil {
		o.took(take, *b, n)
		giveBack(b)
	}
	switch {
	case err != nil:
		return err
	case rerr != nil:
		return &os.PathError{Op: "read", Path: "worker output", Err: rerr}
	case n == 0:
		return io.EOF
	}
	return nil
}

func (o *outputReader) took(take func([]byte), b []byte, n int) {
	if n > 0 {
		take(b[:n])
	}
	o.big = n >= smallRead
}
