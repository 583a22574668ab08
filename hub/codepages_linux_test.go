package hub

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rssFileKB is this process's RssFile (its resident file-backed pages).
func rssFileKB(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "RssFile:"); ok {
			n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			require.NoError(t, err)
			return n
		}
	}
	t.Fatal("no RssFile in /proc/self/status")
	return 0
}

// releaseCode gives back the executable's resident read-only pages, and
// the code goes on running: they come back as it runs.
func TestReleaseCode(t *testing.T) {
	before := rssFileKB(t)
	releaseCode()
	after := rssFileKB(t)
	assert.Less(t, after, before*3/4, "RssFile before %d kB, after %d kB", before, after)
	h := testHub(t, testPaths(t))
	assert.NotNil(t, h)
	assert.Greater(t, rssFileKB(t), after)
}

// A read-only private mapping whose pages were written before it was made
// read-only (the RELRO segment of a PIE or cgo build, which the dynamic
// loader relocates) keeps what was written; a clean one is let go.
func TestReleaseKeepsWrittenReadOnlyPages(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	page := os.Getpagesize()
	mapOf := func(name string) []byte {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, bytes.Repeat([]byte{'f'}, 2*page), 0o600))
		f, err := os.Open(path)
		require.NoError(t, err)
		defer f.Close()
		m, err := unix.Mmap(int(f.Fd()), 0, 2*page, unix.PROT_READ, unix.MAP_PRIVATE)
		require.NoError(t, err)
		t.Cleanup(func() { unix.Munmap(m) })
		return m
	}
	relro := mapOf("relro")
	require.NoError(t, unix.Mprotect(relro, unix.PROT_READ|unix.PROT_WRITE))
	relro[0], relro[page] = 'r', 'r'
	require.NoError(t, unix.Mprotect(relro, unix.PROT_READ))
	releaseMappingsOf(filepath.Join(dir, "relro"))
	assert.Equal(t, "rr", string([]byte{relro[0], relro[page]}), "the written pages were dropped")

	clean := mapOf("clean")
	_ = clean[0] + clean[page]
	b, err := os.ReadFile("/proc/self/smaps")
	require.NoError(t, err)
	spans := cleanReadOnlyMappings(bytes.NewReader(b), filepath.Join(dir, "clean"))
	require.Len(t, spans, 1)
	assert.Equal(t, uintptr(2*page), spans[0][1]-spans[0][0])
}

// Only a mapping whose smaps counts say it holds no anonymous page, resident
// or swapped, is a candidate.
func TestCleanReadOnlyMappings(t *testing.T) {
	const smaps = `00400000-00c7d000 r-xp 00000000 08:01 1234 /bin/replhub
Size:               8692 kB
Rss:                5000 kB
Anonymous:             0 kB
Swap:                  0 kB
VmFlags: rd ex mr mw me
00c7d000-01600000 r--p 0087d000 08:01 1234 /bin/replhub
Anonymous:             0 kB
Swap:                  0 kB
01600000-01700000 r--p 01200000 08:01 1234 /bin/replhub
Anonymous:           120 kB
Swap:                  0 kB
01700000-01800000 r--p 01300000 08:01 1234 /bin/replhub
Anonymous:             0 kB
Swap:                  8 kB
01800000-01900000 r--p 01400000 08:01 1234 /bin/replhub
Swap:                  0 kB
01900000-01a00000 rw-p 01500000 08:01 1234 /bin/replhub
Anonymous:             0 kB
Swap:                  0 kB
01a00000-01b00000 r--p 00000000 00:00 0
Anonymous:             0 kB
Swap:                  0 kB
01b00000-01c00000 r--p 01600000 08:01 1234 /bin/replhub
Anonymous:             0 kB
Swap:                  0 kB
`
	assert.Equal(t, [][2]uintptr{{0x400000, 0xc7d000}, {0xc7d000, 0x1600000}, {0x1b00000, 0x1c00000}},
		cleanReadOnlyMappings(strings.NewReader(smaps), "/bin/replhub"))
	assert.Empty(t, cleanReadOnlyMappings(strings.NewReader(smaps), "/bin/other"))
}

func TestReadOnlyMapping(t *testing.T) {
	const exe = "/usr/local/bin/replhub"
	for _, c := range []struct {
		line   string
		lo, hi uintptr
		ok     bool
	}{
		{"00400000-00c7d000 r-xp 00000000 08:01 1234 /usr/local/bin/replhub", 0x400000, 0xc7d000, true},
		{"00c7d000-01600000 r--p 0087d000 08:01 1234 /usr/local/bin/replhub", 0xc7d000, 0x1600000, true},
		{"01600000-0165c000 rw-p 01200000 08:01 1234 /usr/local/bin/replhub", 0, 0, false},
		{"00400000-00c7d000 r-xs 00000000 08:01 1234 /usr/local/bin/replhub", 0, 0, false},
		{"00400000-00c7d000 r-xp 00000000 08:01 1234 /usr/lib/libc.so.6", 0, 0, false},
		{"7ffd1000-7ffd3000 r-xp 00000000 00:00 0 [vdso]", 0, 0, false},
		{"00c7d000-00400000 r--p 0 08:01 1 /usr/local/bin/replhub", 0, 0, false},
		{"00400001-00c7d000 r--p 0 08:01 1 /usr/local/bin/replhub", 0, 0, false},
		{"0040000000400000-00c7d000 r--p 0 08:01 1 /usr/local/bin/replhub", 0, 0, false},
		{"00400000 r--p 0 08:01 1 /usr/local/bin/replhub", 0, 0, false},
		{"", 0, 0, false},
	} {
		lo, hi, ok := readOnlyMapping([]byte(c.line), exe)
		assert.Equal(t, c.ok, ok, c.line)
		assert.Equal(t, c.lo, lo, c.line)
		assert.Equal(t, c.hi, hi, c.line)
	}
}

// Whatever a maps line holds, a range comes back only for a private,
// unwritable mapping of the path, page-aligned and not empty.
func FuzzReadOnlyMapping(f *testing.F) {
	f.Add([]byte("00400000-00c7d000 r-xp 00000000 08:01 1234 /x"))
	f.Add([]byte("ffffffffffff0000-ffffffffffffffff r--p 0 0:0 0 /x"))
	f.Fuzz(func(t *testing.T, line []byte) {
		lo, hi, ok := readOnlyMapping(line, "/x")
		if !ok {
			return
		}
		fields := bytes.Fields(line)
		if hi <= lo || lo%uintptr(os.Getpagesize()) != 0 || string(fields[5]) != "/x" || fields[1][1] == 'w' || fields[1][3] != 'p' {
			t.Fatalf("%q gave %x-%x", line, lo, hi)
		}
	})
}
