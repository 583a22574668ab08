package hubtest

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/internal/lean"
	"github.com/replhub/replhub/wire"
)

// HubSocket listens where a client dials the hub, under a runtime folder
// (and home) of the test's own, for a test that plays the hub; getenv
// points there. The listener closes when the test ends.
func HubSocket(t *testing.T) (getenv func(string) string, ln net.Listener) {
	t.Helper()
	rt := t.TempDir()
	dir, _ := lean.RuntimeDir(func(string) string { return rt })
	require.NoError(t, os.Mkdir(dir, 0o700))
	ln, err := net.Listen("unix", filepath.Join(dir, lean.SocketName))
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	return func(k string) string {
		if k == "XDG_RUNTIME_DIR" || k == "HOME" {
			return rt
		}
		return ""
	}, ln
}

// PlayHub listens where a client dials the hub (HubSocket) and answers
// each request line with the next of replies, news (an event or a
// progress) with the reply after it too (closing the connection when they
// run out); it returns the getenv that points there and the requests it
// read, once it is done.
func PlayHub(t *testing.T, replies ...wire.Reply) (func(string) string, <-chan []wire.Request) {
	t.Helper()
	getenv, ln := HubSocket(t)
	got := make(chan []wire.Request, 1)
	go func() {
		var reqs []wire.Request
		defer func() { got <- reqs }()
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		r := bufio.NewReader(c)
		news := false
		for _, rep := range replies {
			if !news {
				line, err := r.ReadBytes('\n')
				if err != nil {
					return
				}
				var req wire.Request
				if json.Unmarshal(line, &req) != nil {
					return
				}
				reqs = append(reqs, req)
			}
			news = rep.Event != nil || rep.Progress != nil
			rep.V = wire.Version
			if wire.Write(c, rep) != nil {
				return
			}
		}
	}()
	return getenv, got
}
