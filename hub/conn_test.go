package hub

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/wire"
)

// Quick requests, pipelined or one after another, are read and answered
// by the connection's one reader, in order; a request that reads the
// ones after it (a transfer, attach) has its own reader from the start.
func TestQuickRequestsNeedOneReader(t *testing.T) {
	h := testHub(t, testPaths(t))
	// However slow this machine is, each ping is answered before
	// another reader would start.
	h.readAhead = time.Hour
	sock := filepath.Join(t.TempDir(), "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	require.NoError(t, err)
	defer ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan struct{})
	go func() {
		defer close(served)
		c, err := ln.AcceptUnix()
		if err == nil {
			h.serveConn(ctx, c)
		}
	}()
	c, err := net.Dial("unix", sock)
	require.NoError(t, err)
	defer c.Close()
	br := bufio.NewReader(c)
	pong := func() {
		t.Helper()
		line, err := br.ReadBytes('\n')
		require.NoError(t, err)
		var rep wire.Reply
		require.NoError(t, json.Unmarshal(line, &rep))
		require.Equal(t, "pong", rep.Message)
	}
	ping := wire.Request{V: wire.Version, Op: wire.OpPing}
	var batch bytes.Buffer
	for i := 0; i < 200; i++ {
		require.NoError(t, wire.WriteRequest(&batch, ping))
	}
	_, err = c.Write(batch.Bytes())
	require.NoError(t, err)
	for i := 0; i < 200; i++ {
		pong()
	}
	for i := 0; i < 50; i++ {
		require.NoError(t, wire.WriteRequest(c, ping))
		pong()
	}
	assert.EqualValues(t, 1, h.readers.Load(), "readers started for 250 quick requests")
	c.Close()
	select {
	case <-served:
	case <-time.After(5 * time.Second):
		t.Fatal("the connection was not let go after its client hung up")
	}
}
