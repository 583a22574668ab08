package hub

import (
	"bufio"
	"bytes"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// releaseCode unmaps the pages of the hub's own executable that are
// mapped read-only (its code and constants) from the hub's page tables.
// They stay in the page cache: what runs again maps them back with a minor
// fault, without reading the disk. What start-up alone ran (the inits of
// the MCP SDK, x509, the JSON schemas) then stops counting as the hub's
// memory. Writable mappings are never touched: dropping one would lose
// what was written to it.
func releaseCode() {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lo, hi, ok := readOnlyMapping(sc.Bytes(), exe)
		if !ok {
			continue
		}
		unix.Syscall(unix.SYS_MADVISE, lo, hi-lo, unix.MADV_DONTNEED)
	}
}

// readOnlyMapping parses one line of /proc/self/maps ("lo-hi perms offset
// dev inode path") and reports the range of a private read-only mapping
// of path.
func readOnlyMapping(line []byte, path string) (lo, hi uintptr, ok bool) {
	f := bytes.Fields(line)
	if len(f) != 6 || string(f[5]) != path || len(f[1]) != 4 || f[1][0] != 'r' || f[1][1] != '-' || f[1][3] != 'p' {
		return 0, 0, false
	}
	a, b, found := bytes.Cut(f[0], []byte("-"))
	if !found {
		return 0, 0, false
	}
	l, err1 := strconv.ParseUint(string(a), 16, 64)
	h, err2 := strconv.ParseUint(string(b), 16, 64)
	if err1 != nil || err2 != nil || h <= l || l%uint64(os.Getpagesize()) != 0 {
		return 0, 0, false
	}
	return uintptr(l), uintptr(h), true
}
