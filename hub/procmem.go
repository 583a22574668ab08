package hub

import (
	"strconv"
	"syscall"
)

// The session list tells each local session's memory: its worker's and
// its descendants' resident pages, from /proc. A list of 50 sessions
// reads some 500 files; os.Open and os.ReadFile spend ten system calls
// on each (fcntl, a try at the poller, fstat), which made the list take
// 20 ms more than a cell. These read them with open, read and close.

// treeRSS is the resident memory of a local process and its descendants
// (the worker, and what its cells started), from /proc; 0 when the
// process is gone. At most maxTree processes are counted.
func treeRSS(pid int) int64 {
	var r procReader
	var total int64
	for _, p := range r.tree(pid) {
		total += r.rss(p)
	}
	return total
}

// procRSS reads a local process's resident memory from /proc.
func procRSS(pid int) int64 {
	var r procReader
	return r.rss(pid)
}

// maxTree bounds the processes treeRSS counts, and maxProcFile what it
// reads of a file.
const (
	maxTree     = 1000
	maxProcFile = 1 << 20
)

// procReader reads /proc files into buffers it keeps: a file's bytes, a
// folder's entries, a path.
type procReader struct {
	buf   []byte
	dents []byte
	path  []byte
}

// tree lists pid and its descendants, pid first, maxTree at most.
func (r *procReader) tree(pid int) []int {
	out := []int{pid}
	seen := map[int]bool{pid: true}
	for i := 0; i < len(out) && len(out) < maxTree; i++ {
		for _, c := range r.children(out[i]) {
			if !seen[c] && len(out) < maxTree {
				seen[c] = true
				out = append(out, c)
			}
		}
	}
	return out
}

// rss reads /proc/PID/statm's resident pages, in bytes; 0 without it.
func (r *procReader) rss(pid int) int64 {
	return statmRSS(r.read(r.pidPath(pid, "statm"))) * int64(syscall.Getpagesize())
}

// statmRSS is the second field of a statm file ("size resident shared
// ..."), in pages; 0 when it has none.
func statmRSS(b []byte) int64 {
	i := 0
	for i < len(b) && b[i] != ' ' {
		i++
	}
	i++
	j := i
	for j < len(b) && b[j] >= '0' && b[j] <= '9' && j-i < 18 {
		j++
	}
	if i >= len(b) || j == i {
		return 0
	}
	pages, _ := strconv.ParseInt(string(b[i:j]), 10, 64)
	return pages
}

// children lists a process's children: those of each of its threads
// (/proc/PID/task/TID/children), for a child belongs to the thread that
// started it.
func (r *procReader) children(pid int) []int {
	var out []int
	for _, tid := range r.tasks(pid) {
		p := r.pidPath(pid, "task/")
		p = strconv.AppendInt(p, int64(tid), 10)
		p = append(p, "/children"...)
		out = appendPids(out, r.read(p))
	}
	return out
}

// tasks lists a process's threads (/proc/PID/task).
func (r *procReader) tasks(pid int) []int {
	fd, err := openProc(r.pidPath(pid, "task"), syscall.O_DIRECTORY)
	if err != nil {
		return nil
	}
	defer syscall.Close(fd)
	if r.dents == nil {
		r.dents = make([]byte, 4096)
	}
	var tids []int
	for {
		n, err := syscall.ReadDirent(fd, r.dents)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			return tids
		}
		var names []string
		_, _, names = syscall.ParseDirent(r.dents[:n], -1, names)
		for _, name := range names {
			if tid, err := strconv.Atoi(name); err == nil {
				tids = append(tids, tid)
			}
		}
	}
}

// pidPath is /proc/PID/ and rest, in r's path buffer.
func (r *procReader) pidPath(pid int, rest string) []byte {
	p := append(r.path[:0], "/proc/"...)
	p = strconv.AppendInt(p, int64(pid), 10)
	p = append(p, '/')
	p = append(p, rest...)
	r.path = p
	return p
}

// read reads the file at path (which r.path may hold) into r's buffer,
// maxProcFile at most; nil when it cannot.
func (r *procReader) read(path []byte) []byte {
	fd, err := openProc(path, 0)
	if err != nil {
		return nil
	}
	defer syscall.Close(fd)
	if r.buf == nil {
		r.buf = make([]byte, 512)
	}
	n := 0
	for {
		if n == len(r.buf) {
			if n >= maxProcFile {
				return r.buf[:n]
			}
			r.buf = append(r.buf, make([]byte, len(r.buf))...)
		}
		m, err := syscall.Read(fd, r.buf[n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil
		}
		if m == 0 {
			return r.buf[:n]
		}
		n += m
	}
}

// openProc opens path (not NUL-terminated) read-only, close-on-exec.
func openProc(path []byte, flags int) (int, error) {
	for {
		fd, err := syscall.Open(string(path), syscall.O_RDONLY|syscall.O_CLOEXEC|flags, 0)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}

// appendPids appends the numbers of a children file ("12 34 ") to out.
func appendPids(out []int, b []byte) []int {
	n, digits := 0, false
	for _, c := range b {
		if c >= '0' && c <= '9' {
			if n < 1<<40 {
				n = n*10 + int(c-'0')
			}
			digits = true
			continue
		}
		if digits {
			out = append(out, n)
		}
		n, digits = 0, false
	}
	if digits {
		out = append(out, n)
	}
	return out
}
