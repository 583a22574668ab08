package tests

import (
	"bytes"
	"fmt"
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
)

// A frame whose len is absurd ends its session alone, with a death note
// naming the violation, before the hub allocates anything for it; the hub
// and every other session go on.
func TestHugeFrameLenEndsOnlyItsSession(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	r := e.Run("exec", "bystander", "keep = 41")
	require.Equal(t, 0, r.Code, "%s", r)
	for _, n := range []string{"68719476736", "4611686018427387904"} {
		name := "attacker" + n[:3]
		r = e.Run("exec", name, "import os")
		require.Equal(t, 0, r.Code, "%s", r)
		// The worker's frame pipe is fd 4 (its dup of the original fd 1).
		code := fmt.Sprintf(`os.write(4, b'{"op":"pong","len":%s}\n'); import time; time.sleep(30)`, n)
		r = e.Run("exec", name, code)
		assert.Equal(t, 4, r.Code, "the session is reported dead: %s", r)
		assert.Contains(t, r.Stdout+r.Stderr, "broke the frame protocol (protocol violation: a pong frame with a payload (len "+n+")")
		r = e.Run("sessions")
		assert.Contains(t, r.Stdout, name, "a death note is listed: %s", r)
	}
	r = e.Run("exec", "bystander", "keep + 1")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "Out[2]: 42")
	stillServes(t, e)
}

// Half a frame, then nothing: the session is ended within the hub's stall
// bound (10 s) with a note, not left hanging with every caller.
func TestHalfFrameEndsItsSession(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	r := e.Run("exec", "half", "import os, time")
	require.Equal(t, 0, r.Code, "%s", r)
	t0 := time.Now()
	r = e.Run("exec", "half", `os.write(4, b'{"op":"pong",'); time.sleep(60)`, "-t", "40")
	took := time.Since(t0)
	assert.Equal(t, 4, r.Code, "%s", r)
	assert.Contains(t, r.Stdout+r.Stderr, "half a frame, then nothing for 1")
	// The stall bound (10 s) ended it, not the cell (60 s) or the exec's
	// timeout (40 s): the margin is for a loaded machine.
	assert.Less(t, took, 30*time.Second)
	t.Logf("a half frame ended its session after %s", took.Round(10*time.Millisecond))
	stillServes(t, e)
}

// Half a frame whose cell then ends: the worker's done frame is glued to it
// and dropped as malformed. An interrupt learns from the worker that the
// cell is over and ends the wait, instead of "still running" for ever.
func TestLostDoneFrameIsRecoveredByInterrupt(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	r := e.Run("exec", "glued", "import os")
	require.Equal(t, 0, r.Code, "%s", r)
	r = e.Run("exec", "glued", `os.write(4, b'{"op":"pong",')`, "-t", "2")
	assert.Equal(t, 3, r.Code, "the done frame was lost, so the cell looks running: %s", r)
	r = e.Run("interrupt", "glued")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "had already finished cell 2")
	r = e.Run("wait", "glued", "-t", "5")
	assert.Contains(t, r.Stdout+r.Stderr, "its done frame was lost")
	r = e.Run("exec", "glued", "1 + 1")
	require.Equal(t, 0, r.Code, "the session goes on: %s", r)
	assert.True(t, strings.Contains(r.Stdout, "Out[3]: 2"), "%s", r)
}

// usable waits (bounded) until session name runs a cell again.
func usable(t *testing.T, e *hubtest.Env, name string) {
	t.Helper()
	var r hubtest.Result
	waitFor(t, func() bool {
		r = e.Run("exec", name, "6 * 7", "-t", "10")
		return r.Code != 2 || !strings.Contains(r.Stderr, "busy")
	}, func() string { return "session " + name + " stays busy: " + r.String() })
	require.Equal(t, 0, r.Code, "session %s is not usable: %s", name, r)
	assert.Contains(t, r.Stdout, "42")
}

// noPartFile waits (bounded) until no .replhub-part file is left in dir.
func noPartFile(t *testing.T, dir string) {
	t.Helper()
	var left []string
	waitFor(t, func() bool {
		left, _ = filepath.Glob(filepath.Join(dir, "*.replhub-part"))
		return len(left) == 0
	}, func() string { return fmt.Sprintf("part files left: %v", left) })
}

// Ctrl-C on `replhub pull` of 300 MB: the CLI returns, no part file is
// left, and the session serves the next cell.
func TestCtrlCDuringPull(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	src := filepath.Join(e.Cwd, "big.bin")
	randomFile(t, src, 300<<20)
	r := e.Run("exec", "files", "1")
	require.Equal(t, 0, r.Code, "%s", r)
	destDir := t.TempDir()
	dest := filepath.Join(destDir, "big.bin")
	for round := 0; round < 3; round++ {
		cmd := exec.Command(e.Bin, "pull", "files", src, dest)
		cmd.Env, cmd.Dir = e.Vars, e.Cwd
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		require.NoError(t, cmd.Start())
		// Wait until bytes land, then Ctrl-C, at a different point each round.
		part := dest + ".replhub-part"
		for i := 0; i < 500; i++ {
			if fi, err := os.Stat(part); err == nil && fi.Size() > int64(round)*40<<20 {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Fatalf("round %d: the CLI did not return after Ctrl-C: %s", round, out.String())
		}
		noPartFile(t, destDir)
		usable(t, e, "files")
	}
	_, err := os.Stat(dest)
	assert.True(t, os.IsNotExist(err), "an interrupted pull leaves no file")
	stillServes(t, e)
}

// mountTmpfs mounts a tmpfs of size MiB (root only) and unmounts it at
// cleanup.
func mountTmpfs(t *testing.T, size int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%dm", size), "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("cannot mount a tmpfs here: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return dir
}

// A pull into a full disk fails with a clear error, leaves no part file,
// and the sessions go on: from the command line, and from one session
// pulling from another into a full disk on its side.
func TestPullIntoFullDisk(t *testing.T) {
	t.Parallel()
	full := mountTmpfs(t, 20)
	e := hubtest.Start(t)
	src := filepath.Join(e.Cwd, "big.bin")
	randomFile(t, src, 100<<20)
	r := e.Run("exec", "files", "1")
	require.Equal(t, 0, r.Code, "%s", r)

	r = e.Run("pull", "files", src, filepath.Join(full, "big.bin"))
	assert.Equal(t, 2, r.Code, "%s", r)
	assert.Contains(t, r.Stderr, "no space left on device")
	noPartFile(t, full)
	usable(t, e, "files")

	code := fmt.Sprintf(`try:
    session("files").pull(%q, %q)
except OSError as e:
    print("failed:", e)`, src, filepath.Join(full, "copy.bin"))
	r = e.Run("exec", "puller", code, "-t", "60")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "failed:")
	assert.Contains(t, r.Stdout, "No space left on device")
	noPartFile(t, full)
	usable(t, e, "files")
	usable(t, e, "puller")
}

// Interrupting a cell that waits in a pull from another session stops the
// pull over there too; both sessions go on.
func TestInterruptSessionPull(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	src := filepath.Join(e.Cwd, "big.bin")
	randomFile(t, src, 300<<20)
	r := e.Run("exec", "files", "1")
	require.Equal(t, 0, r.Code, "%s", r)
	dest := filepath.Join(t.TempDir(), "copy.bin")
	for round := 0; round < 3; round++ {
		code := fmt.Sprintf(`for i in range(20): session("files").pull(%q, %q)`, src, dest)
		r = e.Run("exec", "puller", code, "-t", "0.3")
		require.Equal(t, 3, r.Code, "%s", r)
		time.Sleep(time.Duration(round) * 150 * time.Millisecond)
		r = e.Run("interrupt", "puller")
		require.Equal(t, 0, r.Code, "%s", r)
		r = e.Run("wait", "puller", "-t", "20")
		assert.Contains(t, r.Stdout, "KeyboardInterrupt", "%s", r)
		noPartFile(t, filepath.Dir(dest))
		usable(t, e, "files")
		usable(t, e, "puller")
	}
}
