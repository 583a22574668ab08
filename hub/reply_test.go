package hub

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/wire"
)

// A result goes as the text the command line prints when the request
// asked for it (plain, or its JSON) and printing takes no more, with the
// exit code given; else whole.
func TestResultReply(t *testing.T) {
	v := "2"
	done := &wire.Result{Session: "s", Cell: 1, Status: wire.StatusOK, Value: &v}
	queued := &wire.Result{Session: "s", Cell: 4, Status: wire.StatusQueued, Ahead: 1}
	fan := &wire.Result{Session: "g", Status: wire.StatusOK, Fan: []wire.HostResult{{Host: "h"}}}

	rep := resultReply(wire.Request{Op: wire.OpExec, Plain: true}, done, done.ExitCode())
	require.NotNil(t, rep.Plain)
	assert.Equal(t, wire.Plain{Exit: 0, Text: done.Text()}, *rep.Plain)

	rep = resultReply(wire.Request{Op: wire.OpWait, JSON: true}, queued, queued.WaitExitCode())
	require.NotNil(t, rep.Plain)
	assert.Equal(t, wire.ExitRunning, rep.Plain.Exit)
	assert.Equal(t, queued.PlainJSON().Text, rep.Plain.Text)

	rep = resultReply(wire.Request{Op: wire.OpWait, Plain: true}, queued, queued.WaitExitCode())
	assert.Equal(t, wire.ExitRunning, rep.Plain.Exit)
	assert.Equal(t, 0, queued.ExitCode(), "an exec that queued its cell did what it asked")

	for _, req := range []wire.Request{{Op: wire.OpWait}, {Op: wire.OpExec}} {
		assert.Equal(t, wire.Reply{Result: done}, resultReply(req, done, 0), "not asked for")
	}
	assert.Equal(t, wire.Reply{Result: fan}, resultReply(wire.Request{Op: wire.OpWait, Plain: true}, fan, 0), "a group's hosts")
}

// An interrupt's or a kill's message goes as the line the command line
// prints, when package early asks for it.
func TestMessageReply(t *testing.T) {
	assert.Equal(t, wire.Reply{Plain: &wire.Plain{Text: "killed session 's'\n"}},
		messageReply(wire.Request{Op: wire.OpKill, Plain: true}, "killed session 's'"))
	assert.Equal(t, wire.Reply{Message: "killed session 's'"}, messageReply(wire.Request{Op: wire.OpKill}, "killed session 's'"))
}
