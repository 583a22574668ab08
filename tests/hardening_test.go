package tests

import (
	"fmt"
	"strings"
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
	e := hubtest.Start(t)
	r := e.Run("exec", "half", "import os, time")
	require.Equal(t, 0, r.Code, "%s", r)
	t0 := time.Now()
	r = e.Run("exec", "half", `os.write(4, b'{"op":"pong",'); time.sleep(60)`, "-t", "40")
	took := time.Since(t0)
	assert.Equal(t, 4, r.Code, "%s", r)
	assert.Contains(t, r.Stdout+r.Stderr, "half a frame, then nothing for 1")
	assert.Less(t, took, 13*time.Second)
	t.Logf("a half frame ended its session after %s", took.Round(10*time.Millisecond))
	stillServes(t, e)
}

// Half a frame whose cell then ends: the worker's done frame is glued to it
// and dropped as malformed. An interrupt learns from the worker that the
// cell is over and ends the wait, instead of "still running" for ever.
func TestLostDoneFrameIsRecoveredByInterrupt(t *testing.T) {
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
