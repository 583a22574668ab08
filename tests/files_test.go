package tests

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/tests/hubtest"
	"github.com/replhub/replhub/tests/sshtest"
)

// randomFile writes size pseudo-random bytes (fast, not crypto) and returns
// their sha256. One random MiB is made, and each 4 KiB of each MiB written
// carries its own offset in its first 8 bytes, so that no two 4 KiB blocks
// are alike and a block moved or repeated changes the sum: a byte-by-byte
// generator for the whole file takes 13 s in a race-built test.
func randomFile(t *testing.T, path string, size int64) string {
	t.Helper()
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	h := sha256.New()
	buf := make([]byte, 1<<20)
	x := uint64(88172645463325252)
	for i := 0; i+8 <= len(buf); i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		binary.LittleEndian.PutUint64(buf[i:], x)
	}
	for written := int64(0); written < size; {
		for i := 0; i < len(buf); i += 4096 {
			binary.LittleEndian.PutUint64(buf[i:], uint64(written)+uint64(i))
		}
		n := int64(len(buf))
		if size-written < n {
			n = size - written
		}
		_, err := f.Write(buf[:n])
		require.NoError(t, err)
		h.Write(buf[:n])
		written += n
	}
	return hex.EncodeToString(h.Sum(nil))
}

func sha(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	h := sha256.New()
	_, err = io.Copy(h, f)
	require.NoError(t, err)
	return hex.EncodeToString(h.Sum(nil))
}

func TestFilesCLIHalfGiB(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("moves 1 GiB")
	}
	e := hubtest.Start(t)
	e.Setenv("REPLHUB_PYTHON", py(t, "3.11"))
	src := filepath.Join(e.Dir, "big.bin")
	sum := randomFile(t, src, 512<<20)
	ok(t, e.Run("exec", "f", "1"))
	dest := filepath.Join(e.Dir, "big.copy")
	out := ok(t, e.Run("push", "f", src, dest))
	assert.Regexp(t, `pushed 536870912 bytes to session 'f' in \S+ \(\d+\.\d MB/s\)`, out)
	assert.Equal(t, sum, sha(t, dest))
	back := filepath.Join(e.Dir, "big.back")
	out = ok(t, e.Run("pull", "f", dest, back))
	assert.Regexp(t, `pulled 536870912 bytes from session 'f'`, out)
	assert.Equal(t, sum, sha(t, back))
	os.Remove(back)
	os.Remove(dest)
	// Windowed: the hub never held much of the file, a quarter of it at
	// most (its peak is the same for a file of any size: some 130 MiB
	// race-built). A race-built hub keeps shadow memory beside its own:
	// half.
	limit := int64(128 << 20)
	if hubtest.Race {
		limit *= 2
	}
	assert.Less(t, peakRSS(t, e.HubPid()), limit, "the hub's peak memory after moving 1 GiB")

	// On a terminal, a progress bar; the throughput at the end always.
	if _, err := exec.LookPath("script"); err == nil {
		small := filepath.Join(e.Dir, "small.bin")
		randomFile(t, small, 64<<20)
		cmd := exec.Command("script", "-qec", fmt.Sprintf("%s push f %s %s", e.Bin, small, dest), "/dev/null")
		cmd.Env = e.Vars
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		assert.Regexp(t, `\r\s*\d+% \[=*\s*\] \d+/67 MB  \d+\.\d MB/s`, string(out))
		os.Remove(dest)
	}

	// The hub killed mid-transfer leaves nothing under the destination's
	// name, and no partial file either.
	cmd := exec.Command(e.Bin, "push", "f", src, dest)
	cmd.Env = e.Vars
	require.NoError(t, cmd.Start())
	// Killed once the part file has bytes in it: the push is under way.
	started := false
	for i := 0; i < 2000 && !started; i++ {
		fi, err := os.Stat(dest + ".replhub-part")
		started = err == nil && fi.Size() > 0
		if !started {
			time.Sleep(2 * time.Millisecond)
		}
	}
	require.True(t, started, "the push began")
	require.NoError(t, syscall.Kill(e.HubPid(), syscall.SIGKILL))
	cmd.Wait()
	// The worker sees the hub gone and removes its part file.
	assert.Eventually(t, func() bool {
		_, err := os.Stat(dest + ".replhub-part")
		return os.IsNotExist(err)
	}, 10*time.Second, 20*time.Millisecond, "the partial file went with the worker")
	_, err := os.Stat(dest)
	assert.True(t, os.IsNotExist(err), "nothing under the destination's name")
}

func TestFilesRules(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	e.Setenv("REPLHUB_PYTHON", py(t, "3.11"))
	ok(t, e.Run("exec", "f", "1"))
	dir := e.Dir
	src := filepath.Join(dir, "src.sh")
	require.NoError(t, os.WriteFile(src, []byte("#!/bin/sh\necho hi\n"), 0o751))

	// A new file takes the source's mode.
	ok(t, e.Run("push", "f", src, filepath.Join(dir, "new.sh")))
	fi, err := os.Stat(filepath.Join(dir, "new.sh"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o751), fi.Mode().Perm())

	// Overwriting keeps the destination's mode.
	existing := filepath.Join(dir, "existing.txt")
	require.NoError(t, os.WriteFile(existing, []byte("old"), 0o640))
	ok(t, e.Run("push", "f", src, existing))
	fi, _ = os.Stat(existing)
	assert.Equal(t, os.FileMode(0o640), fi.Mode().Perm())
	b, _ := os.ReadFile(existing)
	assert.Equal(t, "#!/bin/sh\necho hi\n", string(b))

	// A symlink destination stays a link to the replaced file.
	real := filepath.Join(dir, "real.txt")
	link := filepath.Join(dir, "link.txt")
	require.NoError(t, os.WriteFile(real, []byte("before"), 0o600))
	require.NoError(t, os.Symlink(real, link))
	ok(t, e.Run("push", "f", src, link))
	li, err := os.Lstat(link)
	require.NoError(t, err)
	assert.True(t, li.Mode()&os.ModeSymlink != 0, "still a link")
	b, _ = os.ReadFile(real)
	assert.Equal(t, "#!/bin/sh\necho hi\n", string(b))

	// Bytes from a session are 0600; pull with and without dest.
	out := ok(t, e.Run("exec", "g", fmt.Sprintf(`f = session("f")
f.push(b"secret bytes", %q)
f.pull(%q), f.pull(%q, %q)`, filepath.Join(dir, "bytes.bin"), filepath.Join(dir, "bytes.bin"), real, filepath.Join(dir, "pulled.sh"))))
	assert.Contains(t, out, "(b'secret bytes', None)")
	fi, _ = os.Stat(filepath.Join(dir, "bytes.bin"))
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	fi, _ = os.Stat(filepath.Join(dir, "pulled.sh"))
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "real.txt was 0600")

	// One file at a time: a folder gives an error suggesting tar.
	r := e.Run("push", "f", dir, filepath.Join(dir, "x"))
	assert.Equal(t, 2, r.Code)
	assert.Contains(t, r.Stderr, "is a folder: push one file at a time (tar it first)")
	r = e.Run("pull", "f", dir, filepath.Join(dir, "y"))
	assert.Equal(t, 2, r.Code)
	assert.Contains(t, r.Stderr, "is a folder: pull one file at a time (tar it first)")
	r = e.Run("pull", "f", "/no/such/file", filepath.Join(dir, "z"))
	assert.Contains(t, r.Stderr, "cannot read /no/such/file")
	_, err = os.Stat(filepath.Join(dir, "z.replhub-part"))
	assert.True(t, os.IsNotExist(err))
	// ~ is the session's home.
	out = ok(t, e.Run("exec", "g", `import os; os.path.expanduser("~") == os.environ["HOME"]`))
	assert.Contains(t, out, "True")
}

// What a transfer names on either side is a regular file, or refused in a
// line that says what it is: a FIFO would block the session's open for
// good, a device never end or be replaced by a file. An empty path is
// refused before anything is sent. A file whose size says nothing (/proc)
// is pulled whole, and the bytes written are the ones told.
func TestFilesNotRegular(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	e.Setenv("REPLHUB_PYTHON", py(t, "3.11"))
	ok(t, e.Run("exec", "f", "1"))
	dir := e.Dir
	fifo, file := filepath.Join(dir, "ff"), filepath.Join(dir, "f.txt")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	require.NoError(t, os.WriteFile(file, []byte("hi\n"), 0o600))

	run := func(args ...string) hubtest.Result {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, e.Bin, args...)
		cmd.Env = e.Vars
		out, err := cmd.CombinedOutput()
		require.Nil(t, ctx.Err(), "replhub %v never ended", args)
		var ee *exec.ExitError
		code := 0
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		return hubtest.Result{Stderr: string(out), Code: code}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"pull", "f", fifo, filepath.Join(dir, "out")}, fifo + " is a named pipe, not a regular file: pull copies regular files only"},
		{[]string{"pull", "f", "/dev/zero", filepath.Join(dir, "out")}, "/dev/zero is a character device, not a regular file: pull copies regular files only"},
		{[]string{"push", "f", file, fifo}, fifo + " is a named pipe, not a regular file: only a regular file is replaced"},
		{[]string{"push", "f", fifo, filepath.Join(dir, "out")}, fifo + " is a named pipe, not a regular file: push copies regular files only"},
		{[]string{"pull", "f", file, fifo}, fifo + " is a named pipe, not a regular file: only a regular file is replaced"},
		{[]string{"push", "f", file, ""}, "replhub: push: DEST is empty: give a file's path\n"},
		{[]string{"push", "f", "", file}, "replhub: push: SRC is empty: give a file's path\n"},
		{[]string{"pull", "f", "", file}, "replhub: pull: SRC is empty: give a file's path\n"},
		{[]string{"pull", "f", file, ""}, "replhub: pull: DEST is empty: give a file's path\n"},
	} {
		r := run(c.args...)
		assert.Equal(t, 2, r.Code, "%v: %s", c.args, r)
		assert.Contains(t, r.Stderr, c.want, "%v", c.args)
		assert.Equal(t, 1, strings.Count(r.Stderr, "\n"), "one line: %v: %s", c.args, r)
	}
	fi, err := os.Lstat(fifo)
	require.NoError(t, err)
	assert.True(t, fi.Mode()&os.ModeNamedPipe != 0, "the FIFO is still one")
	_, err = os.Stat(filepath.Join(dir, "out"))
	assert.True(t, os.IsNotExist(err), "nothing written")
	assert.Contains(t, ok(t, e.Run("exec", "f", "2 + 2")), "4", "the session is free")

	st := filepath.Join(dir, "status")
	out := ok(t, e.Run("pull", "f", "/proc/self/status", st))
	fi, err = os.Stat(st)
	require.NoError(t, err)
	assert.Greater(t, fi.Size(), int64(0))
	assert.Contains(t, out, fmt.Sprintf("pulled %d bytes from session 'f'", fi.Size()))

	// A sysfs file's size says 4096 for a line: pull, push and a
	// session's own push of one copy the line (each failed as "shrank").
	const sysfs = "/sys/class/net/lo/address"
	want, err := os.ReadFile(sysfs)
	require.NoError(t, err)
	require.Less(t, len(want), 4096)
	ok(t, e.Run("exec", "f2", "1"))
	for i, args := range [][]string{
		{"pull", "f", sysfs, filepath.Join(dir, "a1")},
		{"push", "f", sysfs, filepath.Join(dir, "a2")},
		{"exec", "f", fmt.Sprintf("session('f2').push(%q, %q)", sysfs, filepath.Join(dir, "a3"))},
	} {
		ok(t, e.Run(args...))
		got, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("a%d", i+1)))
		require.NoError(t, err, "%v", args)
		assert.Equal(t, string(want), string(got), "%v", args)
	}
}

// A file that says it is regular but waits for what it gives
// (/proc/kmsg, a tracing pipe) holds a transfer only while it is wanted:
// a push from here ends as its client goes (the hub's read of it ends and
// the file is closed, where a blocking read kept a thread and the file for
// good), a pull from a session too (its read had held the session busy
// until it was killed), and a session's own push of it runs until it is
// interrupted, not cut short as if the file had ended; another session's
// pull of it ends with that cell's interrupt. Each session goes on.
func TestTransfersOfAFileThatWaitsEndWithTheirClient(t *testing.T) {
	t.Parallel()
	const kmsg = "/proc/kmsg"
	f, err := os.Open(kmsg)
	if err != nil {
		t.Skipf("%s cannot be read here: %v", kmsg, err)
	}
	f.Close()
	e := hubtest.Start(t)
	ok(t, e.Run("exec", "k", "1"))
	ok(t, e.Run("exec", "k2", "1"))
	holds := func(pid int) bool {
		for _, target := range fdsOf(t, pid) {
			if strings.TrimSuffix(target, " (cloexec)") == kmsg {
				return true
			}
		}
		return false
	}
	for _, c := range []struct {
		what   string
		holder int
		run    func(context.Context) error
	}{
		{"push", e.HubPid(), func(ctx context.Context) error {
			_, err := e.Client().Push(ctx, "k", kmsg, filepath.Join(e.Dir, "kmsg"), nil)
			return err
		}},
		{"pull", workerPid(t, e, "k"), func(ctx context.Context) error {
			_, err := e.Client().Pull(ctx, "k", kmsg, filepath.Join(e.Dir, "kmsg"), nil)
			return err
		}},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- c.run(ctx) }()
		waitFor(t, func() bool { return holds(c.holder) }, func() string { return c.what + ": " + kmsg + " was never opened" })
		select {
		case err := <-done:
			t.Fatalf("%s: the transfer of %s ended before its client went: %v", c.what, kmsg, err)
		case <-time.After(300 * time.Millisecond):
		}
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the cancelled transfer did not return", c.what)
		}
		waitFor(t, func() bool { return !holds(c.holder) }, func() string { return c.what + ": " + kmsg + " is still open after its client went" })
		assert.Contains(t, ok(t, e.Run("exec", "k", "'goes on'")), "'goes on'", c.what)
	}

	// A pull that an interrupt of its session stops says so.
	pulled := make(chan hubtest.Result, 1)
	go func() { pulled <- e.Run("pull", "k", kmsg, filepath.Join(e.Dir, "kmsg3")) }()
	kpid := workerPid(t, e, "k")
	waitFor(t, func() bool { return holds(kpid) }, func() string { return "the pull never opened " + kmsg })
	assert.Contains(t, ok(t, e.Run("interrupt", "k")), "interrupted the read session 'k' was serving")
	select {
	case r := <-pulled:
		assert.Equal(t, 2, r.Code, "%s", r)
		assert.Contains(t, r.Stderr, "the pull of /proc/kmsg was stopped by an interrupt of session 'k'; no file was written")
	case <-time.After(10 * time.Second):
		t.Fatal("the interrupted pull did not end")
	}
	assert.NoFileExists(t, filepath.Join(e.Dir, "kmsg3"))

	// A session's own push, in a cell: it waits for the file until the
	// cell is interrupted.
	r := e.Run("exec", "k", fmt.Sprintf("session('k2').push(%q, %q)", kmsg, filepath.Join(e.Dir, "kmsg2")), "--no-wait")
	require.Equal(t, 0, r.Code, "%s", r)
	waitFor(t, func() bool { return holds(kpid) }, func() string { return "the cell never opened " + kmsg })
	time.Sleep(300 * time.Millisecond)
	out := e.Run("wait", "k", "-t", "0.1")
	assert.Contains(t, out.Stdout+out.Stderr, "running", "the cell's push ended as if the file had: %s", out)
	ok(t, e.Run("interrupt", "k"))
	out = e.Run("wait", "k", "-t", "10")
	assert.Contains(t, out.Stdout+out.Stderr, "KeyboardInterrupt", "%s", out)
	waitFor(t, func() bool { return !holds(kpid) }, func() string { return kmsg + " is still open after the cell ended" })
	assert.Contains(t, ok(t, e.Run("exec", "k", "'goes on'")), "'goes on'")

	// Another session's pull of it, from a cell: the cell's interrupt
	// stops the serve too.
	r = e.Run("exec", "k2", fmt.Sprintf("session('k').pull(%q, %q)", kmsg, filepath.Join(e.Dir, "kmsg4")), "--no-wait")
	require.Equal(t, 0, r.Code, "%s", r)
	waitFor(t, func() bool { return holds(kpid) }, func() string { return "the serve never opened " + kmsg })
	ok(t, e.Run("interrupt", "k2"))
	out = e.Run("wait", "k2", "-t", "10")
	assert.Contains(t, out.Stdout+out.Stderr, "KeyboardInterrupt", "%s", out)
	waitFor(t, func() bool { return !holds(kpid) }, func() string { return kmsg + " is still open after the pull's cell ended" })
	assert.Contains(t, ok(t, e.Run("exec", "k", "'goes on'")), "'goes on'")
}

func TestFilesOwnerKeptByRoot(t *testing.T) {
	t.Parallel()
	if os.Getuid() != 0 {
		t.Skip("needs root to own files as another user")
	}
	e := hubtest.Start(t)
	e.Setenv("REPLHUB_PYTHON", py(t, "3.11"))
	ok(t, e.Run("exec", "r", "1"))
	dest := filepath.Join(e.Dir, "owned.txt")
	require.NoError(t, os.WriteFile(dest, []byte("x"), 0o644))
	require.NoError(t, os.Chown(dest, 65534, 65534))
	src := filepath.Join(e.Dir, "src.txt")
	require.NoError(t, os.WriteFile(src, []byte("new content"), 0o600))
	ok(t, e.Run("push", "r", src, dest))
	fi, err := os.Stat(dest)
	require.NoError(t, err)
	st := fi.Sys().(*syscall.Stat_t)
	assert.Equal(t, uint32(65534), st.Uid, "a root writer keeps the destination's owner")
	assert.Equal(t, os.FileMode(0o644), fi.Mode().Perm())
}

func TestFilesAcrossHosts(t *testing.T) {
	t.Parallel()
	w := newSSHWorld(t, []string{"hostA", "hostB"}, sshtest.Options{})
	w.WriteConfig(`{"hosts": {"host*": {"reach": ["host*"]}}}`)
	w.Setenv("REPLHUB_PYTHON", py(t, "3.11"))
	src := filepath.Join(w.Dir, "mid.bin")
	sum := randomFile(t, src, 20<<20+123)
	ok(t, w.Run("exec", "ra", "1", "--host", "hostA"))
	ok(t, w.Run("exec", "rb", "1", "--host", "hostB", "--python", py(t, "3.6")))
	// local to remote, and back
	a := filepath.Join(w.Dir, "on-a.bin")
	ok(t, w.Run("push", "ra", src, a))
	assert.Equal(t, sum, sha(t, a))
	// remote to remote through this machine, into a Python 3.6 session
	b := filepath.Join(w.Dir, "on-b.bin")
	out := ok(t, w.Run("exec", "ra", fmt.Sprintf(`rb = session("rb"); rb.push(%q, %q); len(rb.pull(%q))`, a, b, b)))
	assert.Contains(t, out, fmt.Sprint(20<<20+123))
	assert.Equal(t, sum, sha(t, b))
	// a Python 3.6 session pulling
	c := filepath.Join(w.Dir, "on-c.bin")
	ok(t, w.Run("exec", "rb", fmt.Sprintf(`session("ra").pull(%q, %q)`, a, c)))
	assert.Equal(t, sum, sha(t, c))
}

// peakRSS is a process's peak resident memory (VmHWM).
func peakRSS(t *testing.T, pid int) int64 { return procStatus(t, pid, "VmHWM") }
