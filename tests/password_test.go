package tests

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/tests/hubtest"
)

// TestRealSudoPasswordNotInHubMemory starts root sessions with a real sudo
// password, relayed by the client and then asked by the hub itself, and
// reads the hub's whole memory afterwards: no copy of the password, raw or
// in base64, may be left in it.
func TestRealSudoPasswordNotInHubMemory(t *testing.T) {
	const py = "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		t.Skip("needs /usr/bin/python3, which another user can run")
	}
	// sudoUser makes a fresh random password per run; it reaches the hub
	// only as sudo's answer: the askpass program reads it from a file.
	pw := sudoUser(t, "rhpw", false)
	e := hubtest.StartAs(t, "rhpw")
	program, calls := askpassFor(t, e, pw)
	e.Setenv("SUDO_ASKPASS", program)
	e.Setenv("REPLHUB_PYTHON", py)

	// Base64 without padding, so that a copy is found whatever follows it.
	forms := map[string]string{
		"raw":                       pw,
		"base64":                    base64.RawStdEncoding.EncodeToString([]byte(pw)),
		"URL base64":                base64.RawURLEncoding.EncodeToString([]byte(pw)),
		"base64 with a newline":     base64.RawStdEncoding.EncodeToString([]byte(pw + "\n")),
		"URL base64 with a newline": base64.RawURLEncoding.EncodeToString([]byte(pw + "\n")),
	}
	check := func(when string) {
		t.Helper()
		pid := e.HubPid()
		require.NotZero(t, pid)
		needles := []string{program}
		for _, s := range forms {
			needles = append(needles, s)
		}
		found := scanMemory(t, pid, needles)
		// The scan sees the hub's heap: the askpass program's path, which
		// the hub keeps in the session's environment, is found.
		require.True(t, found[program], "the memory scan reads the hub's heap")
		for name, s := range forms {
			assert.False(t, found[s], "%s, the hub's memory holds a copy of the password (%s)", when, name)
		}
	}

	// The client runs the askpass program and relays the password.
	r := e.Run("exec", "ops", "import os; os.geteuid()", "--sudo")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "Out[1]: 0")
	r = e.Run("exec", "ops", "open('/etc/shadow').read(5)")
	assert.Contains(t, r.Stdout, "Out[2]: 'root:'")
	assert.Equal(t, 1, countLines(calls))
	check("after the client relayed it")

	// A session opens a root one: the hub runs the askpass program itself.
	r = e.Run("exec", "me", `import os
(os.geteuid() != 0, session("me2", sudo=True).call(lambda: os.geteuid()))`)
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "Out[1]: (True, 0)")
	assert.Equal(t, 2, countLines(calls))
	check("after the hub asked for it")
}

// scanMemory reads every readable mapping of process pid (the caller must
// be allowed to ptrace it: root) and returns which of needles occur.
func scanMemory(t *testing.T, pid int, needles []string) map[string]bool {
	t.Helper()
	maps, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	require.NoError(t, err)
	defer maps.Close()
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	require.NoError(t, err)
	defer mem.Close()
	longest := 0
	for _, n := range needles {
		longest = max(longest, len(n))
	}
	found := map[string]bool{}
	buf := make([]byte, 1<<20)
	sc := bufio.NewScanner(maps)
	read := 0
	for sc.Scan() {
		// 7f0000000000-7f0000021000 rw-p 00000000 00:00 0   [heap]
		f := strings.Fields(sc.Text())
		if len(f) < 2 || f[1][0] != 'r' || (len(f) >= 6 && (f[5] == "[vvar]" || f[5] == "[vsyscall]")) {
			continue
		}
		lo, hi, _ := strings.Cut(f[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		require.NoError(t, err1)
		require.NoError(t, err2)
		// Read in chunks that overlap by one needle less a byte, so a
		// needle across two chunks is still seen.
		for off := start; off < end; {
			n := min(uint64(len(buf)), end-off)
			got, err := mem.ReadAt(buf[:n], int64(off))
			if got > 0 {
				read += got
				for _, s := range needles {
					if bytes.Contains(buf[:got], []byte(s)) {
						found[s] = true
					}
				}
			}
			if err != nil && err != io.EOF || got < int(n) || off+n >= end {
				break
			}
			off += n - uint64(longest-1)
		}
	}
	require.NoError(t, sc.Err())
	require.NotZero(t, read, "nothing of the hub's memory was readable")
	return found
}
