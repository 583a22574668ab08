package hub

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A cell socket's hub end holds a frame of asyncExecAt and more with its
// worker reading nothing, as a pipe does, whatever the machine's default
// send buffer (net.core.wmem_default): such a frame is written in the
// exec's call.
func TestCellSocketHoldsWhatAPipeHolds(t *testing.T) {
	hub, worker, ok := socketPair(cellSendBuffer)
	if !ok {
		t.Skip("this kernel cannot make a socket refuse descriptors")
	}
	defer hub.Close()
	defer worker.Close()
	// What the kernel grants: up to wmem_max, which a container may not
	// show (then at least a pipe's worth).
	want, exact := cellSendBuffer, false
	if b, err := os.ReadFile("/proc/sys/net/core/wmem_max"); err == nil {
		if max, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			want, exact = min(want, max), true
		}
	}
	f, err := hub.File()
	require.NoError(t, err)
	got, err := syscall.GetsockoptInt(int(f.Fd()), syscall.SOL_SOCKET, syscall.SO_SNDBUF)
	f.Close()
	require.NoError(t, err)
	if exact {
		assert.Equal(t, 2*want, got, "the kernel doubles what it is given")
	} else {
		assert.GreaterOrEqual(t, got, 2*(64<<10))
	}

	require.NoError(t, hub.SetWriteDeadline(time.Now().Add(2*time.Second)))
	_, err = hub.Write(bytes.Repeat([]byte("x"), 64<<10))
	require.NoError(t, err, "written with nothing read")
}
