package early

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/client"
	"github.com/replhub/replhub/config"
	"github.com/replhub/replhub/internal/lean"
	"github.com/replhub/replhub/tests/hubtest"
	"github.com/replhub/replhub/wire"
)

func run(getenv func(string) string, code, stdin string) (*Sent, int, string, string) {
	var out, errb bytes.Buffer
	s, exit := send(Call{Op: opExec, Name: "s", Code: code, Timeout: 30}, stdio{strings.NewReader(stdin), &out, &errb, getenv, false, false, nil})
	return s, exit, out.String(), errb.String()
}

func TestExecPlain(t *testing.T) {
	getenv, got := hubtest.PlayHub(t, wire.Reply{Plain: &wire.Plain{Exit: 1, Text: "Out[1]: <2>\n"}})
	s, exit, out, errs := run(getenv, "1+1", "")
	assert.Nil(t, s)
	assert.Equal(t, 1, exit)
	assert.Equal(t, "Out[1]: <2>\n", out)
	assert.Empty(t, errs)
	reqs := <-got
	require.Len(t, reqs, 1)
	assert.Equal(t, wire.Request{V: wire.Version, Op: wire.OpExec, Name: "s", Code: "1+1", Timeout: 30, Plain: true}, reqs[0])
}

// --json asks for JSON, not for "plain" (which a hub that does not know
// "json" would answer with a text), with the call's -t; its plain reply is
// printed as it comes.
func TestExecJSON(t *testing.T) {
	getenv, got := hubtest.PlayHub(t, wire.Reply{Plain: &wire.Plain{Exit: 0, Text: "{\n  \"session\": \"s\"\n}\n"}})
	var out, errb bytes.Buffer
	s, exit := send(Call{Op: opExec, Name: "s", Code: "1+1", Timeout: 5, JSON: true}, stdio{strings.NewReader(""), &out, &errb, getenv, false, false, nil})
	assert.Nil(t, s)
	assert.Equal(t, 0, exit)
	assert.Equal(t, "{\n  \"session\": \"s\"\n}\n", out.String())
	reqs := <-got
	require.Len(t, reqs, 1)
	assert.Equal(t, wire.Request{V: wire.Version, Op: wire.OpExec, Name: "s", Code: "1+1", Timeout: 5, JSON: true}, reqs[0])
}

// A new session: the exec goes again with this process's folder and
// environment, on the same connection; code "-" is read from stdin once.
func TestExecNeedEnv(t *testing.T) {
	getenv, got := hubtest.PlayHub(t, wire.Reply{Err: &wire.Error{Code: wire.CodeNeedEnv, Message: "new"}},
		wire.Reply{Plain: &wire.Plain{Text: "[created session 's']\n"}})
	s, exit, out, _ := run(getenv, "-", "x = 1")
	assert.Nil(t, s)
	assert.Equal(t, 0, exit)
	assert.Equal(t, "[created session 's']\n", out)
	reqs := <-got
	require.Len(t, reqs, 2)
	assert.Empty(t, reqs[0].Cwd)
	assert.Nil(t, reqs[0].Env)
	wd, _ := os.Getwd()
	assert.Equal(t, wd, reqs[1].Cwd)
	assert.Equal(t, os.Environ(), reqs[1].Env)
	assert.Equal(t, "x = 1", reqs[1].Code)
}

// newSessionHub is a hub that answers an exec as for a new session: it
// asks for the folder and environment, then says the session was made.
// It calls before(i) as request i has come, before it answers it.
func newSessionHub(t *testing.T, before func(i int)) func(string) string {
	getenv, ln := hubtest.HubSocket(t)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		r := bufio.NewReader(c)
		for i, rep := range []wire.Reply{{Err: &wire.Error{Code: wire.CodeNeedEnv, Message: "new"}},
			{Plain: &wire.Plain{Text: "[created session 's']\n"}}} {
			if _, err := r.ReadBytes('\n'); err != nil {
				return
			}
			before(i)
			rep.V = wire.Version
			if wire.Write(c, rep) != nil {
				return
			}
		}
	}()
	return getenv
}

// A reply slower than slowAfter calls slow, once, before the wait goes
// on (init then leaves one P to the wait): here a new session's, whose
// two replies each take 50 ms.
func TestSlowReplyCallsSlowOnce(t *testing.T) {
	getenv := newSessionHub(t, func(int) { time.Sleep(50 * time.Millisecond) })
	var out, errb bytes.Buffer
	slow := 0
	s, exit := send(Call{Op: opExec, Name: "s", Code: "1", Timeout: 30},
		stdio{strings.NewReader(""), &out, &errb, getenv, false, false, func() { slow++ }})
	assert.Nil(t, s)
	assert.Equal(t, 0, exit)
	assert.Equal(t, "[created session 's']\n", out.String())
	assert.Equal(t, 1, slow)
}

// A new session's start is a long wait: slow is called as the hub asks
// for the folder and environment, before the exec goes again, however
// soon the hub asked.
func TestNewSessionCallsSlowAtOnce(t *testing.T) {
	var slow atomic.Int32
	slowBefore := make(chan int32, 1)
	getenv := newSessionHub(t, func(i int) {
		if i == 1 {
			slowBefore <- slow.Load()
		}
	})
	var out, errb bytes.Buffer
	s, exit := send(Call{Op: opExec, Name: "s", Code: "1", Timeout: 30},
		stdio{strings.NewReader(""), &out, &errb, getenv, false, false, func() { slow.Add(1) }})
	assert.Nil(t, s)
	assert.Equal(t, 0, exit)
	select {
	case n := <-slowBefore:
		assert.Equal(t, int32(1), n, "slow was not called before the exec went again")
	case <-time.After(10 * time.Second):
		t.Fatal("the exec did not go again")
	}
	assert.Equal(t, int32(1), slow.Load())
}

// --max-output, --no-wait, --queue, --python, --host and --sudo go with
// the exec, and again with the caller's folder and environment for a new
// session.
func TestExecFlags(t *testing.T) {
	getenv, got := hubtest.PlayHub(t, wire.Reply{Err: &wire.Error{Code: wire.CodeNeedEnv, Message: "new"}},
		wire.Reply{Plain: &wire.Plain{Text: "[created session 's']\n"}})
	var out, errb bytes.Buffer
	call := Call{Op: opExec, Name: "s", Code: "1", Timeout: 30, MaxOutput: 40, NoWait: true, Queue: true, Python: "/opt/py", Host: "lab-7", Sudo: true}
	s, exit := send(call, stdio{strings.NewReader(""), &out, &errb, getenv, false, false, nil})
	assert.Nil(t, s)
	assert.Equal(t, 0, exit)
	reqs := <-got
	require.Len(t, reqs, 2)
	for _, req := range reqs {
		assert.Equal(t, 40, req.MaxOutput)
		assert.True(t, req.NoWait)
		assert.True(t, req.Queue)
		assert.True(t, req.Plain)
		assert.Equal(t, "/opt/py", req.Python)
		assert.Equal(t, "lab-7", req.Host)
		assert.True(t, req.Sudo)
	}
}

// A run goes as an exec with private set, under a new name of "run-" and
// 16 hex digits, with its flags and with the caller's folder and
// environment at once (its session is always new); code "-" is read from
// stdin. Its plain reply is printed with the hub's exit code. Its start
// is a long wait: slow is called at once, however soon the reply comes.
func TestExecRun(t *testing.T) {
	getenv, got := hubtest.PlayHub(t, wire.Reply{Plain: &wire.Plain{Exit: 3, Text: "[cell still running]\n"}})
	var out, errb bytes.Buffer
	call := Call{Op: opExec, Private: true, Code: "-", Timeout: 2, MaxOutput: 40, Python: "/opt/py", Host: "lab-7", Sudo: true}
	slow := 0
	s, exit := send(call, stdio{strings.NewReader("x = 1"), &out, &errb, getenv, false, false, func() { slow++ }})
	assert.Equal(t, 1, slow)
	assert.Nil(t, s)
	assert.Equal(t, 3, exit)
	assert.Equal(t, "[cell still running]\n", out.String())
	reqs := <-got
	require.Len(t, reqs, 1)
	req := reqs[0]
	assert.Regexp(t, `^run-[0-9a-f]{16}$`, req.Name)
	wd, _ := os.Getwd()
	assert.Equal(t, wire.Request{V: wire.Version, Op: wire.OpExec, Name: req.Name, Code: "x = 1", Timeout: 2, MaxOutput: 40,
		Python: "/opt/py", Host: "lab-7", Sudo: true, Private: true, Cwd: wd, Env: os.Environ(), Plain: true}, req)

	// Each run its own name.
	getenv, got = hubtest.PlayHub(t, wire.Reply{Plain: &wire.Plain{Text: ""}})
	send(Call{Op: opExec, Private: true, Code: "1", Timeout: 30}, stdio{strings.NewReader(""), &out, &errb, getenv, false, false, nil})
	again := <-got
	require.Len(t, again, 1)
	assert.Regexp(t, `^run-[0-9a-f]{16}$`, again[0].Name)
	assert.NotEqual(t, req.Name, again[0].Name)
}

// A wait goes as the hub's wait, with its cell; its plain reply is
// printed with the hub's exit code. It is never sent again with the
// caller's environment: a hub that asks for it is cli's to answer.
func TestExecWait(t *testing.T) {
	getenv, got := hubtest.PlayHub(t, wire.Reply{Plain: &wire.Plain{Exit: 3, Text: "[cell 4 queued]\n"}})
	var out, errb bytes.Buffer
	s, exit := send(Call{Op: opWait, Name: "s", Timeout: 5, Cell: 4, MaxOutput: 10}, stdio{strings.NewReader(""), &out, &errb, getenv, false, false, nil})
	assert.Nil(t, s)
	assert.Equal(t, 3, exit)
	assert.Equal(t, "[cell 4 queued]\n", out.String())
	reqs := <-got
	require.Len(t, reqs, 1)
	assert.Equal(t, wire.Request{V: wire.Version, Op: wire.OpWait, Name: "s", Timeout: 5, Cell: 4, MaxOutput: 10, Plain: true}, reqs[0])

	getenv, got = hubtest.PlayHub(t, wire.Reply{Err: &wire.Error{Code: wire.CodeNeedEnv}}, wire.Reply{Plain: &wire.Plain{}})
	s, exit = send(Call{Op: opWait, Name: "s", Timeout: 30}, stdio{strings.NewReader(""), &out, &errb, getenv, false, false, nil})
	require.NotNil(t, s)
	assert.Equal(t, -1, exit)
	assert.Contains(t, string(s.Line), `"need_env"`)
	assert.Len(t, <-got, 1)
}

// A list goes as the hub's sessions request, with the name it narrows to
// and no timeout; its plain reply is printed.
func TestExecSessions(t *testing.T) {
	getenv, got := hubtest.PlayHub(t, wire.Reply{Plain: &wire.Plain{Text: "lab  idle\n"}})
	var out, errb bytes.Buffer
	s, exit := send(Call{Op: opSessions, Name: "lab", JSON: true}, stdio{strings.NewReader(""), &out, &errb, getenv, false, false, nil})
	assert.Nil(t, s)
	assert.Equal(t, 0, exit)
	assert.Equal(t, "lab  idle\n", out.String())
	reqs := <-got
	require.Len(t, reqs, 1)
	assert.Equal(t, wire.Request{V: wire.Version, Op: wire.OpSessions, Name: "lab", JSON: true}, reqs[0])
}

// An interrupt and a kill go as the hub's requests, with the cell aimed
// at and no timeout, and their plain replies are printed; a need_env
// (which no hub sends them) is cli's to say.
func TestExecInterruptAndKill(t *testing.T) {
	getenv, got := hubtest.PlayHub(t, wire.Reply{Plain: &wire.Plain{Text: "interrupted cell 3\n"}})
	var out, errb bytes.Buffer
	s, exit := send(Call{Op: opInterrupt, Name: "s", Cell: 3}, stdio{strings.NewReader(""), &out, &errb, getenv, false, false, nil})
	assert.Nil(t, s)
	assert.Equal(t, 0, exit)
	assert.Equal(t, "interrupted cell 3\n", out.String())
	reqs := <-got
	require.Len(t, reqs, 1)
	assert.Equal(t, wire.Request{V: wire.Version, Op: wire.OpInterrupt, Name: "s", Cell: 3, Plain: true}, reqs[0])

	out.Reset()
	getenv, got = hubtest.PlayHub(t, wire.Reply{Plain: &wire.Plain{Text: "killed session 's'\n"}})
	s, exit = send(Call{Op: opKill, Name: "s"}, stdio{strings.NewReader(""), &out, &errb, getenv, false, false, nil})
	assert.Nil(t, s)
	assert.Equal(t, 0, exit)
	assert.Equal(t, "killed session 's'\n", out.String())
	assert.Equal(t, []wire.Request{{V: wire.Version, Op: wire.OpKill, Name: "s", Plain: true}}, <-got)

	getenv, got = hubtest.PlayHub(t, wire.Reply{Err: &wire.Error{Code: wire.CodeNeedEnv}}, wire.Reply{Plain: &wire.Plain{}})
	s, exit = send(Call{Op: opKill, Name: "s"}, stdio{strings.NewReader(""), &out, &errb, getenv, false, false, nil})
	require.NotNil(t, s)
	assert.Equal(t, -1, exit)
	assert.Len(t, <-got, 1)
}

// What send cannot print goes to package cli: the reply line, or none
// when the hub closed the connection first.
func TestExecLeavesTheRestToCLI(t *testing.T) {
	getenv, _ := hubtest.PlayHub(t, wire.Reply{Err: &wire.Error{Code: wire.CodeBusy, Message: "busy"}})
	s, exit, out, _ := run(getenv, "-", "y")
	require.NotNil(t, s)
	assert.Equal(t, -1, exit)
	assert.Empty(t, out)
	assert.Equal(t, "y", s.Code, "stdin's code is handed on")
	assert.False(t, s.Unsent)
	assert.Contains(t, string(s.Line), `"code":"busy"`)

	getenv, _ = hubtest.PlayHub(t, wire.Reply{Err: &wire.Error{Code: wire.CodeNeedEnv}}, wire.Reply{Err: &wire.Error{Code: wire.CodeNeedEnv}})
	s, _, _, _ = run(getenv, "1", "")
	require.NotNil(t, s, "need_env twice is cli's to say")
	assert.Contains(t, string(s.Line), `"need_env"`)

	getenv, _ = hubtest.PlayHub(t) // closes at once
	s, exit, _, _ = run(getenv, "1", "")
	require.NotNil(t, s)
	assert.Equal(t, -1, exit)
	assert.Nil(t, s.Line)
}

// No hub, or a folder that is not safe: cli does it all (it starts a hub,
// or says what is wrong), and stdin is left unread.
func TestExecLeavesItAllToCLI(t *testing.T) {
	rt := t.TempDir()
	getenv := func(k string) string {
		if k == "XDG_RUNTIME_DIR" {
			return rt
		}
		return ""
	}
	in := strings.NewReader("code")
	var out, errb bytes.Buffer
	s, exit := send(Call{Op: opExec, Name: "s", Code: "-", Timeout: 30}, stdio{in, &out, &errb, getenv, false, false, nil})
	assert.Nil(t, s)
	assert.Equal(t, -1, exit)
	assert.Equal(t, 4, in.Len(), "stdin untouched")

	require.NoError(t, os.Mkdir(filepath.Join(rt, "replhub"), 0o755))
	s, exit = send(Call{Op: opExec, Name: "s", Code: "1", Timeout: 30}, stdio{in, &out, &errb, getenv, false, false, nil})
	assert.Nil(t, s)
	assert.Equal(t, -1, exit)
	assert.Empty(t, out.String()+errb.String())
}

// A query goes as the command line's client sends it, plain or --json
// aside: the same request for each query and its flags.
func TestQuerySentAsTheClientSends(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		args []string
		ask  func(c *client.Client) (*wire.Answer, error)
	}{
		{[]string{"vars", "s", "--all", "--limit", "7", "--wait", "1.235"}, func(c *client.Client) (*wire.Answer, error) {
			return c.Vars(ctx, "s", true, client.QueryOptions{Wait: cobraWait(1.235), Limit: 7})
		}},
		{[]string{"vars", "s", "--wait", "0"}, func(c *client.Client) (*wire.Answer, error) {
			return c.Vars(ctx, "s", false, client.QueryOptions{Wait: -1})
		}},
		{[]string{"inspect", "s", "json.dumps", "--json"}, func(c *client.Client) (*wire.Answer, error) {
			return c.Inspect(ctx, "s", "json.dumps", client.QueryOptions{Wait: cobraWait(2)})
		}},
		{[]string{"complete", "s", "", "--wait=2.45e-7"}, func(c *client.Client) (*wire.Answer, error) {
			return c.Complete(ctx, "s", "", client.QueryOptions{Wait: cobraWait(2.45e-7)})
		}},
		{[]string{"reset", "s", "--keep-imports"}, func(c *client.Client) (*wire.Answer, error) {
			return c.Reset(ctx, "s", true)
		}},
	} {
		call, ok := PlainCall(tc.args)
		require.True(t, ok, "%q", tc.args)
		getenv, got := hubtest.PlayHub(t, wire.Reply{Plain: &wire.Plain{Text: "T\n"}})
		var out, errb bytes.Buffer
		s, exit := send(call, stdio{strings.NewReader(""), &out, &errb, getenv, false, false, nil})
		assert.Nil(t, s)
		assert.Equal(t, 0, exit)
		assert.Equal(t, "T\n", out.String())
		early := <-got
		require.Len(t, early, 1, "%q", tc.args)

		getenv, got = hubtest.PlayHub(t, wire.Reply{Answer: &wire.Answer{Session: "s"}})
		paths, err := config.FromEnv(getenv)
		require.NoError(t, err)
		_, err = tc.ask(client.New(paths))
		require.NoError(t, err, "%q", tc.args)
		byClient := <-got
		require.Len(t, byClient, 1, "%q", tc.args)
		want := byClient[0]
		want.Plain, want.JSON = !call.JSON, call.JSON
		assert.Equal(t, want, early[0], "%q", tc.args)
	}
}

// cobraWait is the wait package cli's queries make of --wait secs.
func cobraWait(secs float64) time.Duration { return time.Duration(secs * float64(time.Second)) }

// A reply to a query that has no answer (a hub gone wrong) is an error,
// not a crash of the command that prints it.
func TestQueryReplyWithoutAnswer(t *testing.T) {
	getenv, _ := hubtest.PlayHub(t, wire.Reply{Message: "hello"})
	paths, err := config.FromEnv(getenv)
	require.NoError(t, err)
	_, err = client.New(paths).Vars(context.Background(), "s", false, client.QueryOptions{})
	assert.ErrorContains(t, err, "malformed reply from hub: no answer")
}

// On a terminal, an exec asks for its cell's output as it is written and
// for a group's progress, and shows them as package cli does.
func TestExecOnTerminal(t *testing.T) {
	out := func(text string) wire.Reply { return wire.Reply{Event: &wire.Event{Kind: wire.EventOut, Text: text}} }
	getenv, got := hubtest.PlayHub(t, out("tick 0\n"), wire.Reply{Progress: &wire.Progress{Session: "s", Hosts: 3, Done: 1}},
		out("ti"), wire.Reply{Event: &wire.Event{Kind: wire.EventCell, Code: "not shown"}}, out("ck 1"),
		// News that lean cannot read (an event with parts) shows nothing.
		wire.Reply{Event: &wire.Event{Kind: wire.EventOut, Text: "not shown", Info: &wire.SessionInfo{Name: "s"}}},
		wire.Reply{Progress: &wire.Progress{Session: "s", Hosts: 3, Done: 2, ElapsedMS: 1 << 62}},
		wire.Reply{Progress: &wire.Progress{Session: "s", Hosts: 3, Done: 2, Failed: 1}},
		wire.Reply{Plain: &wire.Plain{Exit: 1, Text: "Out[1]: 2\n"}})
	var outb, errb bytes.Buffer
	s, exit := send(Call{Op: opExec, Name: "s", Code: "1", Timeout: 30}, stdio{strings.NewReader(""), &outb, &errb, getenv, true, true, nil})
	assert.Nil(t, s)
	assert.Equal(t, 1, exit)
	assert.Equal(t, "tick 0\ntick 1\nOut[1]: 2\n", outb.String())
	clear := "\r" + strings.Repeat(" ", 60) + "\r"
	assert.Equal(t, fmt.Sprintf("\r%-60s", "s: 1/3 done")+clear+fmt.Sprintf("\r%-60s\r%-60s", "s: 2/3 done", "s: 2/3 done, 1 failed")+clear, errb.String())
	reqs := <-got
	require.Len(t, reqs, 1)
	assert.True(t, reqs[0].Stream)
	assert.True(t, reqs[0].Progress)
	assert.True(t, reqs[0].Plain)

	// A reply for package cli: the output's open line goes with it.
	getenv, _ = hubtest.PlayHub(t, out("partial"), wire.Reply{Result: &wire.Result{Status: "ok", Display: []wire.Display{{MIME: "image/png"}}}})
	outb.Reset()
	s, exit = send(Call{Op: opExec, Name: "s", Code: "1", Timeout: 30}, stdio{strings.NewReader(""), &outb, &errb, getenv, true, false, nil})
	require.NotNil(t, s)
	assert.Equal(t, -1, exit)
	assert.Equal(t, "partial", outb.String())
	outb.Reset()
	s.Screen.EndLine(true)
	assert.Equal(t, "\n", outb.String(), "the line is still open for package cli to end")
}

// What a terminal asks for follows package cli: no stream for --json,
// --no-wait or --queue, nor to standard output that is not a terminal;
// no progress where standard error is not one; neither for a list.
func TestTerminalAsksAsCLI(t *testing.T) {
	for _, tc := range []struct {
		call             Call
		outTTY, errTTY   bool
		stream, progress bool
	}{
		{Call{Op: opExec, JSON: true}, true, true, false, true},
		{Call{Op: opExec, NoWait: true}, true, true, false, true},
		{Call{Op: opExec, Queue: true}, true, false, false, false},
		{Call{Op: opExec}, false, true, false, true},
		{Call{Op: opWait}, true, true, false, true},
		{Call{Op: opWait}, true, false, false, false},
		{Call{Op: opSessions}, true, true, false, false},
		{Call{Op: opVars}, true, true, false, false},
		// A run shows its output as it comes, but no group's progress.
		{Call{Op: opExec, Private: true}, true, true, true, false},
		{Call{Op: opExec, Private: true, JSON: true}, true, true, false, false},
	} {
		getenv, got := hubtest.PlayHub(t, wire.Reply{Plain: &wire.Plain{Text: "x\n"}})
		tc.call.Code, tc.call.Timeout = "1", 30
		if !tc.call.Private {
			tc.call.Name = "s"
		}
		var outb, errb bytes.Buffer
		_, exit := send(tc.call, stdio{strings.NewReader(""), &outb, &errb, getenv, tc.outTTY, tc.errTTY, nil})
		assert.Equal(t, 0, exit)
		reqs := <-got
		require.Len(t, reqs, 1)
		assert.Equal(t, tc.stream, reqs[0].Stream, "%+v", tc)
		assert.Equal(t, tc.progress, reqs[0].Progress, "%+v", tc)
	}
}

// slowTerminal takes output as a terminal does: not at once.
type slowTerminal struct{}

func (slowTerminal) Write(p []byte) (int, error) {
	time.Sleep(20 * time.Microsecond)
	return len(p), nil
}

// A cell whose output never pauses still has Ctrl-C interrupt it once the
// reply has taken armAfter: the wait for the handler is a deadline, not a
// pause between lines.
func TestCtrlCArmedWhileOutputPours(t *testing.T) {
	// The test's own handler keeps SIGINT from ending the test binary
	// when early's is not there.
	mine := make(chan os.Signal, 4)
	signal.Notify(mine, os.Interrupt)
	defer signal.Stop(mine)
	getenv, ln := hubtest.HubSocket(t)
	interrupts := make(chan wire.Request, 4)
	go func() {
		for first := true; ; first = false {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			line, _ := bufio.NewReader(c).ReadBytes('\n')
			if !first {
				var req wire.Request
				json.Unmarshal(line, &req)
				interrupts <- req
				wire.Write(c, wire.Reply{V: wire.Version, Message: "interrupted"})
				c.Close()
				continue
			}
			go func() {
				defer c.Close()
				var chunk bytes.Buffer
				for range 300 {
					wire.Write(&chunk, wire.Reply{V: wire.Version, Event: &wire.Event{Kind: wire.EventOut, Text: strings.Repeat("x", 200) + "\n"}})
				}
				for end := time.Now().Add(time.Second); time.Now().Before(end); {
					if _, err := c.Write(chunk.Bytes()); err != nil {
						return
					}
				}
				wire.Write(c, wire.Reply{V: wire.Version, Plain: &wire.Plain{Text: "Out[1]: 1\n"}})
			}()
		}
	}()
	time.AfterFunc(300*time.Millisecond, func() { syscall.Kill(os.Getpid(), syscall.SIGINT) })
	var errb hubtest.LockedBuffer
	_, exit := send(Call{Op: opExec, Name: "s", Code: "1", Timeout: 30}, stdio{strings.NewReader(""), slowTerminal{}, &errb, getenv, true, true, nil})
	assert.Equal(t, 0, exit)
	assert.Contains(t, errb.String(), lean.InterruptNote("s"))
	select {
	case req := <-interrupts:
		assert.Equal(t, wire.OpInterrupt, req.Op)
		assert.Equal(t, "s", req.Name)
	case <-time.After(10 * time.Second):
		t.Fatal("no interrupt reached the hub")
	}
}
