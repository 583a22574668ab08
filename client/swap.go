package client

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/replhub/replhub/internal/atomicfile"
	"github.com/replhub/replhub/internal/procstat"
	"github.com/replhub/replhub/wire"
)

// Swap swaps session name to disk now; force swaps it even while a
// background job runs (the job ends). With name "" it runs the hub's
// sweep: every session nobody has used for swap_after_hours.
func (c *Client) Swap(ctx context.Context, name string, force bool) (*wire.Reply, error) {
	return c.Do(ctx, wire.Request{Op: wire.OpSwap, Name: name, Force: force}, nil)
}

// stopWait bounds StopAndWait: a hub swaps its sessions for at most 90 s
// before it stops.
const stopWait = 100 * time.Second

// StopAndWait is Stop, then waits until the hub's process has exited: a
// stopping hub first swaps its sessions to disk, and a new hub must not
// start sessions under their names before the swaps are there.
func (c *Client) StopAndWait(ctx context.Context) (string, error) {
	pid := c.hubPid()
	_, start, _ := procstat.Stat(pid) // a later process under its pid is not it
	msg, err := c.Stop(ctx)
	if err != nil || pid <= 0 {
		return msg, err
	}
	deadline := time.Now().Add(stopWait)
	for time.Now().Before(deadline) {
		if procstat.Exited(pid, start) {
			return msg, nil
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return "", fmt.Errorf("client: the hub (pid %d) did not exit within %s; see its log", pid, stopWait)
}

// hubPid is the pid in the hub's pid file, or 0.
func (c *Client) hubPid() int {
	b, err := atomicfile.ReadFile(c.Paths.PidFile(), 64)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}
