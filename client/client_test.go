package client_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/client"
	"github.com/replhub/replhub/config"
	"github.com/replhub/replhub/hub"
	"github.com/replhub/replhub/payload"
	"github.com/replhub/replhub/safesock"
	"github.com/replhub/replhub/wire"
)

// startHub runs a hub in this process on a private socket.
func startHub(t testing.TB) config.Paths {
	t.Helper()
	dir, err := os.MkdirTemp("", "client-test-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	p, err := config.FromEnv(func(k string) string {
		switch k {
		case "XDG_RUNTIME_DIR":
			return dir
		case "XDG_STATE_HOME", "XDG_CONFIG_HOME":
			return filepath.Join(dir, k)
		}
		return os.Getenv(k)
	})
	require.NoError(t, err)
	require.NoError(t, safesock.PrepareDir(p.Runtime))
	ln, err := safesock.Listen(p.Socket())
	require.NoError(t, err)
	h, err := hub.New(hub.Options{Paths: p})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.Run(ctx, ln); close(done) }()
	// New asks for cloudpickle's folder in the background (once per
	// process) and keeps the answer in p's state folder: the folder is
	// removed only once that is done.
	t.Cleanup(func() { cancel(); <-done; payload.CloudpickleDir() })
	return p
}

func python(t testing.TB) string {
	for _, p := range []string{"python3"} {
		if _, err := os.Stat("/usr/bin/" + p); err == nil {
			return "/usr/bin/" + p
		}
	}
	t.Skip("needs /usr/bin/python3")
	return ""
}

func TestNoHubWithoutAutoStart(t *testing.T) {
	dir := t.TempDir()
	p, _ := config.FromEnv(func(k string) string {
		if k == "XDG_RUNTIME_DIR" {
			return dir
		}
		return os.Getenv(k)
	})
	c := &client.Client{Paths: p}
	err := c.Ping(context.Background())
	assert.True(t, client.IsNoHub(err), "got %v", err)
	assert.True(t, client.IsNoHub(c.Connect(context.Background())), "Connect dials as a call does")
	msg, err := c.Stop(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "no hub was running", msg)
}

func TestExecSendsTheEnvironmentOnlyToCreate(t *testing.T) {
	p := startHub(t)
	c := &client.Client{Paths: p}
	defer c.Close()
	ctx := context.Background()
	o := client.ExecOptions{Python: python(t), Env: []string{"MARK=42", "PATH=/usr/bin:/bin"}, Cwd: "/"}
	res, err := c.Exec(ctx, "e", "import os; os.environ['MARK']", o)
	require.NoError(t, err)
	assert.Equal(t, "'42'", *res.Value)
	assert.NotNil(t, res.Created)

	// A raw request without env to a live session is served as it is.
	rep, err := c.Do(ctx, wire.Request{Op: wire.OpExec, Name: "e", Code: "1"}, nil)
	require.NoError(t, err)
	assert.Equal(t, "1", *rep.Result.Value)
	// To a new one, the hub asks for it.
	_, err = c.Do(ctx, wire.Request{Op: wire.OpExec, Name: "new", Code: "1"}, nil)
	assert.True(t, wire.IsCode(err, wire.CodeNeedEnv), "got %v", err)

	// The cwd goes with the environment: a new session starts in the one
	// given, or in this process's own.
	dir := t.TempDir()
	o.Cwd = dir
	res, err = c.Exec(ctx, "in-dir", "import os; os.getcwd()", o)
	require.NoError(t, err)
	assert.Equal(t, "'"+dir+"'", *res.Value)
	o.Cwd = ""
	here, err := os.Getwd()
	require.NoError(t, err)
	res, err = c.Exec(ctx, "here", "import os; os.getcwd()", o)
	require.NoError(t, err)
	assert.Equal(t, "'"+here+"'", *res.Value)
}

// A connection made ahead carries the next call, which then dials no more.
func TestConnectAhead(t *testing.T) {
	p := startHub(t)
	c := &client.Client{Paths: p}
	defer c.Close()
	ctx := context.Background()
	require.NoError(t, c.Connect(ctx))
	require.NoError(t, os.Remove(p.Socket()))
	res, err := c.Exec(ctx, "ahead", "6 * 7", client.ExecOptions{Python: python(t), Env: []string{"PATH=/usr/bin:/bin"}, Cwd: "/"})
	require.NoError(t, err)
	assert.Equal(t, "42", *res.Value)
}

func TestConcurrentCalls(t *testing.T) {
	p := startHub(t)
	c := &client.Client{Paths: p}
	defer c.Close()
	ctx := context.Background()
	o := client.ExecOptions{Python: python(t), Timeout: 20 * time.Second}
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			name := string(rune('a' + i))
			res, err := c.Exec(ctx, name, "import time; time.sleep(0.3); 7", o)
			if assert.NoError(t, err) {
				assert.Equal(t, "7", *res.Value)
			}
			_, err = c.Sessions(ctx)
			assert.NoError(t, err)
		}(i)
	}
	wg.Wait()
	l, err := c.Sessions(ctx)
	require.NoError(t, err)
	assert.Len(t, l.Sessions, 4)
}

func TestCancelledCallLeavesTheCellRunning(t *testing.T) {
	p := startHub(t)
	c := &client.Client{Paths: p}
	defer c.Close()
	o := client.ExecOptions{Python: python(t), Timeout: 30 * time.Second}
	// The session is started first: on a loaded machine a start can outlast
	// the call's 300 ms, and then no cell would run to be left running.
	_, err := c.Exec(context.Background(), "slow", "import time", o)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = c.Exec(ctx, "slow", "time.sleep(1); print('out'); 'done'", o)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	res, err := c.Wait(context.Background(), "slow", 10*time.Second, nil)
	require.NoError(t, err)
	assert.Equal(t, "out\n", res.Output, "no output is lost to the caller that went away")
	assert.Equal(t, "'done'", *res.Value)
}

// Requests sent together on one connection are answered in order, a bad
// line among them in its place, each after the one before it ended: a
// cell that runs holds back the ping behind it. The hub goes on serving
// the connection afterwards, and a client that hangs up mid-cell frees
// its session.
func TestPipelinedRequestsAnsweredInOrder(t *testing.T) {
	p := startHub(t)
	c := client.New(p)
	defer c.Close()
	ctx := context.Background()
	_, err := c.Exec(ctx, "pl", "import time", client.ExecOptions{Python: python(t)})
	require.NoError(t, err)

	uc, err := safesock.Dial(ctx, p.Socket())
	require.NoError(t, err)
	defer uc.Close()
	var batch bytes.Buffer
	for _, r := range []wire.Request{{Op: wire.OpExec, Name: "pl", Code: "time.sleep(0.2); 7"}, {Op: wire.OpPing}} {
		r.V = wire.Version
		require.NoError(t, wire.WriteRequest(&batch, r))
	}
	batch.WriteString("{not json\n")
	require.NoError(t, wire.WriteRequest(&batch, wire.Request{V: wire.Version, Op: wire.OpPing}))
	_, err = uc.Write(batch.Bytes())
	require.NoError(t, err)
	br := bufio.NewReader(uc)
	var got []string
	for i := 0; i < 4; i++ {
		line, err := br.ReadBytes('\n')
		require.NoError(t, err)
		var rep wire.Reply
		require.NoError(t, json.Unmarshal(line, &rep))
		switch {
		case rep.Result != nil && rep.Result.Value != nil:
			got = append(got, "exec "+*rep.Result.Value)
		case rep.Err != nil:
			got = append(got, "error "+rep.Err.Code)
		default:
			got = append(got, rep.Message)
		}
	}
	assert.Equal(t, []string{"exec 7", "pong", "error " + wire.CodeBadRequest, "pong"}, got)

	// A client that hangs up mid-cell leaves the session to the next call.
	require.NoError(t, wire.WriteRequest(uc, wire.Request{V: wire.Version, Op: wire.OpExec, Name: "pl", Code: "time.sleep(0.3); 8"}))
	time.Sleep(50 * time.Millisecond)
	uc.Close()
	res, err := c.Wait(ctx, "pl", 10*time.Second, nil)
	require.NoError(t, err)
	require.NotNil(t, res.Value)
	assert.Equal(t, "8", *res.Value)
}
