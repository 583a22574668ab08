package procstat

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// As a helper process, the test binary listens on a socket and keeps
// many threads blocked in syscalls, so that a kill takes a while to end
// them all.
func TestMain(m *testing.M) {
	if sock := os.Getenv("PROCSTAT_HELPER_SOCK"); sock != "" {
		runtime.LockOSThread()
		l, err := net.Listen("unix", sock)
		if err != nil {
			os.Exit(2)
		}
		defer l.Close()
		for i := 0; i < 64; i++ {
			go func() {
				var p [2]int
				if syscall.Pipe(p[:]) == nil {
					var b [1]byte
					syscall.Read(p[0], b[:])
				}
			}()
		}
		select {}
	}
	os.Exit(m.Run())
}

func TestSelf(t *testing.T) {
	state, start, ok := Stat(os.Getpid())
	require.True(t, ok)
	assert.NotEqual(t, byte('Z'), state)
	assert.NotEmpty(t, start)
	assert.True(t, Running(os.Getpid(), ""))
	assert.True(t, Running(os.Getpid(), start))
	assert.False(t, Running(os.Getpid(), start+"0"), "a later process under the same pid")
	assert.False(t, Exited(os.Getpid(), ""))
	assert.False(t, Exited(os.Getpid(), start))
	assert.True(t, Exited(os.Getpid(), start+"0"), "a later process under the same pid")
	assert.False(t, Running(0, ""))
	assert.False(t, Running(-1, ""))
}

// Once Exited says so, the killed process's socket no longer takes a
// connection; Running is false from the kill on. Over many kills the
// first thread is often a zombie while the others still hold the socket.
func TestExitedMeansFilesClosed(t *testing.T) {
	dir := t.TempDir()
	for n := 0; n < 20; n++ {
		sock := filepath.Join(dir, "s")
		os.Remove(sock)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "PROCSTAT_HELPER_SOCK="+sock)
		require.NoError(t, cmd.Start())
		pid := cmd.Process.Pid
		waited := make(chan struct{})
		deadline := time.Now().Add(10 * time.Second)
		for {
			c, err := net.Dial("unix", sock)
			if err == nil {
				c.Close()
				break
			}
			require.True(t, time.Now().Before(deadline), "the helper did not listen")
			time.Sleep(5 * time.Millisecond)
		}
		require.True(t, Running(pid, ""))
		require.False(t, Exited(pid, ""))
		require.NoError(t, cmd.Process.Kill())
		for !Exited(pid, "") {
			require.True(t, time.Now().Before(deadline), "the helper did not exit")
			time.Sleep(time.Millisecond)
		}
		assert.False(t, Running(pid, ""))
		_, err := net.Dial("unix", sock)
		assert.Error(t, err, "kill %d: a socket of an exited process took a connection", n)
		go func() { cmd.Wait(); close(waited) }()
		<-waited
		assert.True(t, Exited(pid, ""), "reaped")
		assert.False(t, Running(pid, ""))
	}
}
