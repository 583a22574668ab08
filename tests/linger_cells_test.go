package tests

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/tests/hubtest"
	"github.com/replhub/replhub/tests/sshtest"
)

// A session on a host takes its exec frames on a cell link, a channel
// to its socket of their own, which its main thread reads while it waits;
// a drop ends it, and the reattached link opens its own. Interrupts, on
// the session's channel, still reach a cell sent on it.
func TestRemoteCellLink(t *testing.T) {
	t.Parallel()
	w, relay := lingerWorld(t)
	cellLinkSession(t, w, "x = 1")

	relay.Drop()
	waitFor(t, func() bool { return sessionInfo(t, w.Env, "r").LinkDownS != 0 }, func() string { return "the hub never saw the link drop" })
	relay.Restore()
	assert.Contains(t, ok(t, w.Run("exec", "r", "x + 1")), "2")
	waitCellLink(t, w, "r") // after a reattach

	r := w.Run("exec", "r", "import time; time.sleep(30)", "--no-wait")
	require.Equal(t, 0, r.Code, "%s", r)
	ok(t, w.Run("interrupt", "r"))
	r = w.Run("wait", "r")
	assert.Contains(t, r.Stdout, "KeyboardInterrupt", "%s", r)
	assert.Contains(t, ok(t, w.Run("exec", "r", "x")), "1")
	ok(t, w.Run("kill", "r"))
}

// cellLinkSession starts session r on the world's host lab, code its
// first cell, its worker ended at cleanup, and waits for its cell link.
func cellLinkSession(t *testing.T, w *sshWorld, code string) {
	t.Helper()
	ok(t, w.Run("exec", "r", code, "--host", "lab"))
	endWorkerAtCleanup(t, w.Env, "r")
	waitCellLink(t, w, "r")
}

// waitCellLink waits until session name's cells come on a cell link
// (opened beside its first cell), a cell at a time.
func waitCellLink(t *testing.T, w *sshWorld, name string) {
	t.Helper()
	var out string
	for i := 0; i < 40; i++ {
		out = ok(t, w.Run("exec", name, cellsProbe))
		if strings.Contains(out, "(True, ") {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no cell link: %s", out)
}

// A server that forbids streamlocal forwarding: exec frames with the rest.
func TestRemoteSessionWithoutStreamLocal(t *testing.T) {
	t.Parallel()
	w, _ := lingerWorldWith(t, "AllowStreamLocalForwarding no")
	ok(t, w.Run("exec", "r", "x = 1", "--host", "lab"))
	endWorkerAtCleanup(t, w.Env, "r")
	for i := 0; i < 5; i++ {
		r := w.Run("exec", "r", "x += 1; x", "-t", "10")
		require.Equal(t, 0, r.Code, "%s", r)
	}
	require.Contains(t, ok(t, w.Run("exec", "r", "x")), "6")
	ok(t, w.Run("kill", "r"))
}

// The far end closes the cell link's channel while the session's own
// channel stays up (sshd's ChannelTimeout on forwarded channels): the next
// exec frame must not be lost.
func TestRemoteCellLinkClosedByTheServer(t *testing.T) {
	t.Parallel()
	w, _ := lingerWorldWith(t, "ChannelTimeout direct-streamlocal@openssh.com=2s")
	cellLinkSession(t, w, "x = 1")
	time.Sleep(5 * time.Second) // the cell link idles out; the session channel stays
	r := w.Run("exec", "r", "x + 1", "-t", "10")
	require.Equal(t, 0, r.Code, "%s", r)
	require.Contains(t, r.Stdout, "2")
	ok(t, w.Run("kill", "r"))
}

// sentAsTheLinkCloses starts session r (n = 0) on a host whose sshd
// closes an idle cell link after 2 s, holds what sshd says (its close of
// the link too) while the link idles out, and sends n += 1; n + 41 without
// waiting: its frame goes on the link as the server closes it. The relay
// is left paused.
func sentAsTheLinkCloses(t *testing.T) (*sshWorld, *sshtest.Relay) {
	t.Helper()
	w, relay := lingerWorldAlive(t, 30, "ChannelTimeout direct-streamlocal@openssh.com=2s")
	cellLinkSession(t, w, "n = 0")
	relay.Pause()
	time.Sleep(3500 * time.Millisecond)
	r := w.Run("exec", "r", "n += 1; n + 41", "--no-wait")
	if r.Code != 0 {
		relay.Resume()
		t.Fatalf("%s", r)
	}
	return w, relay
}

// An exec frame written on the cell link as the server closes it (its
// close still on its way) is dropped there unread: it goes again on the
// session's channel once the close comes, and runs once.
func TestRemoteCellLinkClosedAsAFrameGoes(t *testing.T) {
	t.Parallel()
	w, relay := sentAsTheLinkCloses(t)
	time.Sleep(300 * time.Millisecond)
	relay.Resume()
	r := w.Run("wait", "r", "-t", "15")
	require.Equal(t, 0, r.Code, "%s", r)
	require.Contains(t, r.Stdout, "42")
	require.Equal(t, "1", strings.TrimSpace(ok(t, w.Run("exec", "r", "print(n)"))), "it ran once")
	ok(t, w.Run("kill", "r"))
}

// The same, with an interrupt sent before the frame goes again: the worker
// has not seen the cell, which ends unrun (not "already finished", with its
// result lost).
func TestRemoteInterruptAsTheCellLinkCloses(t *testing.T) {
	t.Parallel()
	w, relay := sentAsTheLinkCloses(t)
	interrupted := make(chan hubtest.Result, 1)
	go func() { interrupted <- w.Run("interrupt", "r") }()
	time.Sleep(500 * time.Millisecond)
	relay.Resume()
	var ir hubtest.Result
	select {
	case ir = <-interrupted:
	case <-time.After(30 * time.Second):
		t.Fatal("the interrupt did not return")
	}
	require.Equal(t, 0, ir.Code, "%s", ir)
	assert.Contains(t, ir.Stdout, "had not started yet", "%s", ir)
	r := w.Run("wait", "r", "-t", "15")
	assert.Contains(t, r.Stdout+r.Stderr, "KeyboardInterrupt", "%s", r)
	require.Equal(t, "0", strings.TrimSpace(ok(t, w.Run("exec", "r", "print(n)"))), "it did not run")
	ok(t, w.Run("kill", "r"))
}

// An exec frame on the cell link of a link that froze: reported never
// reached, and then never run.
func TestRemoteFrozenCellLink(t *testing.T) {
	t.Parallel()
	w, relay := lingerWorldWith(t)
	cellLinkSession(t, w, "x = 1")
	relay.Freeze()
	r := w.Run("exec", "r", "x = 99; 'ran'", "-t", "30")
	t.Logf("%s", r.Stdout+r.Stderr)
	ran := strings.Contains(r.Stdout, "ran")
	require.True(t, ran || strings.Contains(r.Stdout+r.Stderr, "never reached"), "%s", r)
	time.Sleep(2 * time.Second)
	out := ok(t, w.Run("exec", "r", "x"))
	if ran {
		require.Contains(t, out, "99")
	} else {
		require.NotContains(t, out, "99")
	}
	ok(t, w.Run("kill", "r"))
}
