package hub

import (
	"bufio"
	"bytes"
	"io"
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
	releaseMappingsOf(exe)
}

// releaseMappingsOf drops the page-table entries of this process's clean
// private read-only mappings of path (see cleanReadOnlyMappings).
func releaseMappingsOf(path string) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return
	}
	spans := cleanReadOnlyMappings(f, path)
	f.Close()
	for _, s := range spans {
		unix.Syscall(unix.SYS_MADVISE, s[0], s[1]-s[0], unix.MADV_DONTNEED)
	}
}

// cleanReadOnlyMappings reads /proc/PID/smaps and returns the ranges of the
// private read-only mappings of path that hold no anonymous page, resident
// or swapped. A read-only mapping is not always the file as it is on disk:
// the dynamic loader writes a position-independent executable's relocations
// into its RELRO segment (GNU_RELRO: a cgo build, -buildmode=pie, as distros
// build Go) and only then makes it read-only. Those pages are private
// copies; MADV_DONTNEED would drop them and the next read would see the
// file's unrelocated bytes. A mapping whose counts are missing is kept.
func cleanReadOnlyMappings(r io.Reader, path string) [][2]uintptr {
	var spans [][2]uintptr
	var lo, hi uintptr
	var cand bool
	var anon, swap int64 = -1, -1
	flush := func() {
		if cand && anon == 0 && swap == 0 {
			spans = append(spans, [2]uintptr{lo, hi})
		}
		cand, anon, swap = false, -1, -1
	}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Bytes()
		key, rest, found := bytes.Cut(line, []byte(":"))
		if found && len(key) > 0 && bytes.IndexByte(key, ' ') < 0 && bytes.IndexByte(key, '-') < 0 {
			// A field of the mapping above: "Anonymous:   0 kB".
			if !cand {
				continue
			}
			switch string(key) {
			case "Anonymous":
				anon = kB(rest)
			case "Swap":
				swap = kB(rest)
			}
			continue
		}
		flush()
		lo, hi, cand = readOnlyMapping(line, path)
	}
	if sc.Err() != nil {
		return nil
	}
	flush()
	return spans
}

// kB parses a smaps count ("   12 kB"); -1 if it is not one.
func kB(b []byte) int64 {
	f := bytes.Fields(b)
	if len(f) != 2 || string(f[1]) != "kB" {
		return -1
	}
	n, err := strconv.ParseInt(string(f[0]), 10, 64)
	if err != nil || n < 0 {
		return -1
	}
	return n
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
