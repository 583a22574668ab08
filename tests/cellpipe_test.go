package tests

import (
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/internal/rawio"
	"github.com/replhub/replhub/tests/hubtest"
)

// cellsProbe is a cell whose value says whether the worker reads a cell
// pipe or link, and counts the frames it took off them.
const cellsProbe = `[(o.cells is not None, o.cells_read) for o in __import__("gc").get_objects() if type(o).__name__ == "Session" and hasattr(o, "cells_read")][0]`

// A local session takes its exec frames on a pipe of their own, which its
// main thread reads while idle (README: A cell's round trip); once a new
// hub has adopted it, on a second connection to its socket (the cell
// link), and its cells, interrupts and queries go on as before.
func TestLocalCellsComeOnTheirOwnPipe(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	probe := cellsProbe
	r := e.Run("exec", "c", probe)
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "Out[1]: (True, 1)", "the hub sent the cell on the cell pipe")
	r = e.Run("exec", "c", probe)
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "Out[2]: (True, 2)")

	// A cell that sleeps, interrupted.
	interrupted := func() {
		t.Helper()
		r := e.Run("exec", "c", "import time; time.sleep(30)", "--no-wait")
		require.Equal(t, 0, r.Code, "%s", r)
		r = e.Run("interrupt", "c")
		require.Equal(t, 0, r.Code, "%s", r)
		r = e.Run("wait", "c")
		assert.Contains(t, r.Stdout, "KeyboardInterrupt", "%s", r)
	}

	interrupted()

	r = e.Run("restart")
	require.Equal(t, 0, r.Code, "%s", r)
	r = e.Run("exec", "c", "x = 6 * 7; x")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "42")
	r = e.Run("exec", "c", probe)
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "(True, 5)", "the new hub's cells came on its cell link: %s", r)

	// And so on through every restart, an interrupt and a query beside.
	r = e.Run("restart")
	require.Equal(t, 0, r.Code, "%s", r)
	interrupted()
	r = e.Run("vars", "c")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "x")
	r = e.Run("exec", "c", probe)
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "(True, 7)", "every cell came on one: %s", r)
}

// streamsProbe is a cell whose value says, for the worker's cell pipe and
// the stream its frames go out on, what each is, and whether a descriptor
// sent on it gets through.
const streamsProbe = `import array, gc, os, socket, stat
def _probe(fd):
    mode = os.fstat(fd).st_mode
    if not stat.S_ISSOCK(mode):
        return "fifo" if stat.S_ISFIFO(mode) else "other"
    s = socket.socket(fileno=os.dup(fd))
    try:
        s.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [0]))])
        return "socket, took a descriptor"
    except PermissionError:
        return "socket, refused"
    finally:
        s.close()
_s = [o for o in gc.get_objects() if type(o).__name__ == "Session" and hasattr(o, "cells_read")][0]
_c = [o for o in gc.get_objects() if type(o).__name__ == "Channel"][0]
print([_probe(_s.cells.fd), _probe(_c._w)])`

// A local session's round trip goes on two Unix socket pairs (its cell
// pipe, and the stream its frames go out on) where the kernel lets the
// hub's ends refuse descriptors (Linux 6.16 and later), which the hub
// then reads and writes with raw calls; elsewhere on pipes, as before
// (REPLHUB_PLAIN_STREAMS makes a hub do as there); a new hub that adopts
// the session reads its socket and cell link raw too. A descriptor that
// a cell, or a client on the hub's socket, tries to pass is refused at
// its sendmsg, and the session and the hub go on.
func TestLocalStreamsRefuseDescriptors(t *testing.T) {
	t.Parallel()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	require.NoError(t, err)
	f := os.NewFile(uintptr(fds[0]), "probe")
	can := rawio.RefuseRights(f) == nil
	f.Close()
	syscall.Close(fds[1])

	for _, plain := range []bool{false, true} {
		name := map[bool]string{false: "sockets", true: "pipes"}[plain]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := hubtest.Start(t)
			if plain {
				e.Setenv("REPLHUB_PLAIN_STREAMS", "1")
			}
			r := e.Run("exec", "c", streamsProbe)
			require.Equal(t, 0, r.Code, "%s", r)
			if can && !plain {
				assert.Contains(t, r.Stdout, "['socket, refused', 'socket, refused']", "%s", r)
			} else {
				assert.Contains(t, r.Stdout, "['fifo', 'fifo']", "%s", r)
			}
			assert.Contains(t, ok(t, e.Run("exec", "c", "6 * 7")), "Out[2]: 42", "the session goes on")
			assert.Contains(t, ok(t, e.Run("exec", "c", cellsProbe)), "Out[3]: (True, 3)", "every cell came on the cell pipe")
			r = e.Run("exec", "c", "import time; time.sleep(30)", "--no-wait")
			require.Equal(t, 0, r.Code, "%s", r)
			ok(t, e.Run("interrupt", "c"))
			assert.Contains(t, e.Run("wait", "c").Stdout, "KeyboardInterrupt")

			c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: e.Paths.Socket(), Net: "unix"})
			require.NoError(t, err)
			defer c.Close()
			_, _, err = c.WriteMsgUnix([]byte("{}\n"), syscall.UnixRights(0), nil)
			if can {
				assert.ErrorIs(t, err, syscall.EPERM, "the hub's socket refuses descriptors")
			}
			assert.Contains(t, ok(t, e.Run("exec", "c", "7 * 6")), "Out[5]: 42", "the hub goes on")

			// A new hub adopts the session on its socket, with a cell
			// link: both dialed by the hub, refusing descriptors from
			// before they connect. (Where they take them, the probe's
			// byte would reach the hub: it is not sent there.)
			ok(t, e.Run("restart"))
			if can && !plain {
				r = e.Run("exec", "c", streamsProbe)
				require.Equal(t, 0, r.Code, "%s", r)
				assert.Contains(t, r.Stdout, "['socket, refused', 'socket, refused']", "%s", r)
			} else {
				ok(t, e.Run("exec", "c", "pass"))
			}
			assert.Contains(t, ok(t, e.Run("exec", "c", cellsProbe)), "Out[7]: (True, 7)", "the new hub's cells came on its cell link")
			assert.Contains(t, ok(t, e.Run("exec", "c", "6 * 7")), "Out[8]: 42", "the session goes on")
		})
	}
}

// A session whose worker kept more output than its socket holds while no
// hub was attached (the hub was killed while a cell printed) is adopted
// with a cell link all the same, and at once.
func TestCellLinkAfterKeptOutput(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	ok(t, e.Run("exec", "c", "x = 1"))
	ok(t, e.Run("exec", "c", "import time; time.sleep(1); print('x' * 1000000)", "--no-wait"))
	hubPid := e.HubPid()
	require.NoError(t, syscall.Kill(hubPid, syscall.SIGKILL))
	require.True(t, hubtest.WaitGone(hubPid, 10*time.Second))
	time.Sleep(2 * time.Second) // the cell prints while no hub is attached

	t0 := time.Now()
	r := e.Run("wait", "c") // a new hub starts, and adopts the session
	took := time.Since(t0)
	require.Equal(t, 0, r.Code, "%s", r.Stderr)
	r = e.Run("exec", "c", cellsProbe)
	require.Equal(t, 0, r.Code, "%s", r.Stderr)
	out := r.Stdout[strings.LastIndex(r.Stdout, "Out["):]
	assert.Contains(t, out, "(True, ", "the new hub's cell came on a cell link: %s", out)
	assert.Less(t, took, 2500*time.Millisecond, "adopting took the cell link's whole timeout")
}
