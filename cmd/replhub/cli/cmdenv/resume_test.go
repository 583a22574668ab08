package cmdenv

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/client"
	"github.com/replhub/replhub/cmd/replhub/early"
	"github.com/replhub/replhub/internal/lean"
	"github.com/replhub/replhub/tests/hubtest"
	"github.com/replhub/replhub/wire"
)

// Resume prints what package early handed on as the whole call would:
// a plain result, a full one, the hub's error, the hub gone.
func TestResume(t *testing.T) {
	line := func(rep wire.Reply) []byte {
		var b bytes.Buffer
		rep.V = wire.Version
		require.NoError(t, wire.Write(&b, rep))
		return b.Bytes()
	}
	for _, tc := range []struct {
		name     string
		line     []byte
		out, err string
		code     int
	}{
		{"plain", line(wire.Reply{Plain: &wire.Plain{Exit: 3, Text: "T\n"}}), "T\n", "", ExitRunning},
		{"result", line(wire.Reply{Result: &wire.Result{Session: "s", Cell: 2, Status: wire.StatusError, Output: "boom\n"}}), "boom\n", "", ExitCellError},
		{"error", line(wire.Reply{Err: &wire.Error{Code: wire.CodeBusy, Message: "session 's' is busy"}}), "", "replhub: session 's' is busy\n", ExitFailure},
		{"gone", nil, "", "replhub: " + ErrorText(client.ErrHubGone) + "\n", ExitFailure},
		{"garbled", []byte("{\n"), "", "replhub: client: malformed reply from hub", ExitFailure},
	} {
		var out, errb bytes.Buffer
		e := New(IO{Out: &out, Err: &errb}, func(string) string { return "" })
		code := e.Finish(e.Resume(context.Background(), &early.Sent{Call: early.Call{Name: "s", Code: "1", Timeout: 30}, Line: tc.line}))
		assert.Equal(t, tc.code, code, tc.name)
		assert.Equal(t, tc.out, out.String(), tc.name)
		assert.Contains(t, errb.String(), tc.err, tc.name)
		if tc.err == "" {
			assert.Empty(t, errb.String(), tc.name)
		}
	}
}

// Output early showed as it came (on a terminal) may leave its last line
// open: the reply's text starts on a line of its own, as the whole call
// prints it (StreamOn).
func TestResumeAfterStreamedOutput(t *testing.T) {
	v := "2"
	for _, rep := range []wire.Reply{{Plain: &wire.Plain{Text: "Out[1]: 2\n"}}, {Result: &wire.Result{Session: "s", Cell: 1, Status: wire.StatusOK, Value: &v}}} {
		var b, out, errb bytes.Buffer
		rep.V = wire.Version
		require.NoError(t, wire.Write(&b, rep))
		s := &early.Sent{Call: early.Call{Name: "s", Code: "1", Timeout: 30}, Line: b.Bytes(), Screen: &lean.Screen{Out: &out, Err: &errb}}
		s.Screen.Output("partial")
		e := New(IO{Out: &out, Err: &errb}, func(string) string { return "" })
		assert.Equal(t, ExitOK, e.Finish(e.Resume(context.Background(), s)))
		assert.Equal(t, "partial\nOut[1]: 2\n", out.String())
		assert.Empty(t, errb.String())
	}
	// The hub gone before its reply (a restart under a run): the error
	// too.
	var out, errb bytes.Buffer
	s := &early.Sent{Call: early.Call{Op: wire.OpExec, Private: true, Name: "run-0123456789abcdef", Code: "1", Timeout: 30},
		Screen: &lean.Screen{Out: &out, Err: &errb}}
	s.Screen.Output("partial")
	e := New(IO{Out: &out, Err: &errb}, func(string) string { return "" })
	assert.Equal(t, ExitFailure, e.Finish(e.Resume(context.Background(), s)))
	assert.Equal(t, "partial\n", out.String())
	assert.Contains(t, errb.String(), "replhub: ")
}

// With --json, a hub's plain reply is the JSON to print; a whole result
// (from a hub that does not know the request's "json") is printed as JSON,
// as the whole call prints it.
func TestResumeJSON(t *testing.T) {
	v := "3"
	res := &wire.Result{Session: "s", Cell: 2, Status: wire.StatusOK, Value: &v}
	want := res.PlainJSON()
	require.NotNil(t, want)
	for _, rep := range []wire.Reply{{Plain: want}, {Result: res}} {
		var b, out, errb bytes.Buffer
		rep.V = wire.Version
		require.NoError(t, wire.Write(&b, rep))
		e := New(IO{Out: &out, Err: &errb}, func(string) string { return "" })
		code := e.Finish(e.Resume(context.Background(), &early.Sent{Call: early.Call{Name: "s", Code: "1", Timeout: 30, JSON: true}, Line: b.Bytes()}))
		assert.Equal(t, ExitOK, code)
		assert.Equal(t, want.Text, out.String())
		assert.Empty(t, errb.String())
	}
}

// A wait handed on prints as the whole wait does: a queued cell's result
// (from a hub that does not know "plain" on a wait) exits as still running.
func TestResumeWait(t *testing.T) {
	var b, out, errb bytes.Buffer
	res := &wire.Result{Session: "s", Cell: 4, Status: wire.StatusQueued, Ahead: 1}
	require.NoError(t, wire.Write(&b, wire.Reply{V: wire.Version, Result: res}))
	e := New(IO{Out: &out, Err: &errb}, func(string) string { return "" })
	code := e.Finish(e.Resume(context.Background(), &early.Sent{Call: early.Call{Op: wire.OpWait, Name: "s", Timeout: 30}, Line: b.Bytes()}))
	assert.Equal(t, ExitRunning, code)
	assert.Equal(t, res.Text(), out.String())
	assert.Empty(t, errb.String())
}

// A list handed on (from a hub that does not answer it plainly, or for a
// name it lacks) prints as the whole command does: narrowed to the name,
// or an error that there is none.
func TestResumeSessions(t *testing.T) {
	l := &wire.SessionList{Sessions: []wire.SessionInfo{{Name: "a", State: "idle"}, {Name: "b", State: "idle"}}}
	var b bytes.Buffer
	require.NoError(t, wire.Write(&b, wire.Reply{V: wire.Version, Sessions: l}))
	for _, tc := range []struct {
		name, out, err string
		code           int
	}{
		{"b", (&wire.SessionList{Sessions: l.Sessions[1:]}).Text(true), "", ExitOK},
		{"", l.Text(false), "", ExitOK},
		{"nosuch", "", "replhub: no session 'nosuch'\n", ExitFailure},
	} {
		var out, errb bytes.Buffer
		e := New(IO{Out: &out, Err: &errb}, func(string) string { return "" })
		code := e.Finish(e.Resume(context.Background(), &early.Sent{Call: early.Call{Op: wire.OpSessions, Name: tc.name}, Line: b.Bytes()}))
		assert.Equal(t, tc.code, code, tc.name)
		assert.Equal(t, tc.out, out.String(), tc.name)
		assert.Equal(t, tc.err, errb.String(), tc.name)
	}
}

// An interrupt or a kill handed on prints as the whole command does: the
// message of a hub that does not answer them plainly, the hub's error.
func TestResumeInterruptAndKill(t *testing.T) {
	for _, tc := range []struct {
		op  string
		rep wire.Reply
		out string
		err string
	}{
		{wire.OpKill, wire.Reply{Message: "killed session 's'"}, "killed session 's'\n", ""},
		{wire.OpInterrupt, wire.Reply{Message: "session 's' is idle: nothing to interrupt"}, "session 's' is idle: nothing to interrupt\n", ""},
		{wire.OpKill, wire.Reply{Err: &wire.Error{Code: wire.CodeNoSession, Message: "no session 's'"}}, "", "replhub: no session 's'\n"},
		{wire.OpInterrupt, wire.Reply{}, "", "replhub: client: malformed reply from hub: no result, list nor message\n"},
	} {
		var b, out, errb bytes.Buffer
		tc.rep.V = wire.Version
		require.NoError(t, wire.Write(&b, tc.rep))
		e := New(IO{Out: &out, Err: &errb}, func(string) string { return "" })
		code := e.Finish(e.Resume(context.Background(), &early.Sent{Call: early.Call{Op: tc.op, Name: "s"}, Line: b.Bytes()}))
		assert.Equal(t, tc.out, out.String(), "%s %+v", tc.op, tc.rep)
		assert.Equal(t, tc.err, errb.String(), "%s %+v", tc.op, tc.rep)
		if tc.err == "" {
			assert.Equal(t, ExitOK, code)
		} else {
			assert.Equal(t, ExitFailure, code)
		}
	}
}

// A query handed on (from a hub that does not answer one plainly) prints
// its answer as the whole query does: its text, or its JSON, exit 1 for
// one that says why it has none; the plain reply's text as it is.
func TestResumeQuery(t *testing.T) {
	a := &wire.Answer{Session: "s", Kind: wire.OpInspect, Error: "evaluating it raised NameError"}
	for _, asJSON := range []bool{false, true} {
		for _, rep := range []wire.Reply{{Answer: a}, {Plain: a.Plain(asJSON)}} {
			var b, out, errb bytes.Buffer
			rep.V = wire.Version
			require.NoError(t, wire.Write(&b, rep))
			e := New(IO{Out: &out, Err: &errb}, func(string) string { return "" })
			call := early.Call{Op: wire.OpInspect, Name: "s", Expr: "y", Wait: 2, JSON: asJSON}
			code := e.Finish(e.Resume(context.Background(), &early.Sent{Call: call, Line: b.Bytes()}))
			assert.Equal(t, ExitCellError, code)
			assert.Equal(t, a.Plain(asJSON).Text, out.String())
			assert.Empty(t, errb.String())
		}
	}
}

// A call early could not send goes again with the seconds it read: the
// same time.Duration as the command line's, for every millisecond from 0
// to 600 s and for tiny ones, where truncating lost a nanosecond.
func TestSecondsRoundTrip(t *testing.T) {
	for ms := time.Duration(0); ms <= 600*time.Second; ms += time.Millisecond {
		if got := seconds(ms.Seconds()); got != ms {
			t.Fatalf("%v: %v", ms, got)
		}
	}
	for _, d := range []time.Duration{1, 15, 245, 1e9 + 1, 599999999999} {
		assert.Equal(t, d, seconds(d.Seconds()))
	}
}

// A reply that says nothing ran (a new root session wants its password)
// has the exec sent again the whole way with the flags early read:
// --python, --host and --sudo with the rest.
func TestResumeSendsTheFlagsAgain(t *testing.T) {
	v := "2"
	getenv, got := hubtest.PlayHub(t, wire.Reply{Result: &wire.Result{Session: "ops", Cell: 1, Status: wire.StatusOK, Value: &v}})
	var b, out, errb bytes.Buffer
	require.NoError(t, wire.Write(&b, wire.Reply{V: wire.Version, Err: &wire.Error{Code: wire.CodeNeedPassword, Message: "a password", Prompt: "p"}}))
	call := early.Call{Op: wire.OpExec, Name: "ops", Code: "1+1", Timeout: 30, MaxOutput: 9, Python: "/opt/py", Host: "lab-7", Sudo: true}
	e := New(IO{Out: &out, Err: &errb}, getenv)
	assert.Equal(t, ExitOK, e.Finish(e.Resume(context.Background(), &early.Sent{Call: call, Line: b.Bytes()})), "%s", errb.String())
	assert.Equal(t, "Out[1]: 2\n", out.String())
	select {
	case reqs := <-got:
		require.Len(t, reqs, 1)
		req := reqs[0]
		assert.Equal(t, wire.OpExec, req.Op)
		assert.Equal(t, "1+1", req.Code)
		assert.Equal(t, 9, req.MaxOutput)
		assert.Equal(t, "/opt/py", req.Python)
		assert.Equal(t, "lab-7", req.Host)
		assert.True(t, req.Sudo)
	case <-time.After(10 * time.Second):
		t.Fatal("the exec was not sent again")
	}
}

// A run that early could not finish (here a root session's password is
// to be asked) goes again as a run: private, under the name early made,
// with the caller's folder and environment at once; its result prints as
// a run's, with the exit code of a cell the timeout stopped.
func TestResumeRun(t *testing.T) {
	getenv, got := hubtest.PlayHub(t, wire.Reply{Result: &wire.Result{Session: "run-0123456789abcdef", Cell: 1, Status: wire.StatusTimeout, Output: "slow\n"}})
	var b, out, errb bytes.Buffer
	require.NoError(t, wire.Write(&b, wire.Reply{V: wire.Version, Err: &wire.Error{Code: wire.CodeNeedPassword, Message: "a password", Prompt: "p"}}))
	call := early.Call{Op: wire.OpExec, Private: true, Name: "run-0123456789abcdef", Code: "1+1", Timeout: 30, Sudo: true}
	e := New(IO{Out: &out, Err: &errb}, getenv)
	assert.Equal(t, ExitRunning, e.Finish(e.Resume(context.Background(), &early.Sent{Call: call, Line: b.Bytes()})), "%s", errb.String())
	assert.Contains(t, out.String(), "slow\n")
	select {
	case reqs := <-got:
		require.Len(t, reqs, 1)
		req := reqs[0]
		assert.Equal(t, wire.OpExec, req.Op)
		assert.True(t, req.Private)
		assert.Equal(t, "run-0123456789abcdef", req.Name)
		assert.True(t, req.Sudo)
		wd, _ := os.Getwd()
		assert.Equal(t, wd, req.Cwd)
		assert.NotEmpty(t, req.Env)
	case <-time.After(10 * time.Second):
		t.Fatal("the run was not sent again")
	}
}
