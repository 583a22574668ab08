package tests

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/client"
	"github.com/replhub/replhub/tests/hubtest"
	"github.com/replhub/replhub/wire"
)

// Many clients exec on the same sessions at once, straight on the hub's
// socket (the client package, one *client.Client per simulated client).
// Every cell prints and returns a token of its own; each reply must carry
// its own cell's tokens and nobody else's. A busy refusal is fine: the
// client sends the same cell again, a bounded number of times.

const (
	// stressTimeout is every exec's timeout: far longer than a cell takes,
	// so no exec gives up and no result may be announced as one that
	// "finished while nobody waited".
	stressTimeout = 60 * time.Second
	// stressBusyTries bounds how often one cell is sent again after a busy
	// refusal before the client gives up on it.
	stressBusyTries = 5000
)

var (
	stressToken = regexp.MustCompile(`(?:out|val)-(\d+)-(\d+)`)
	stressNote  = regexp.MustCompile(`cell (\d+) finished while nobody waited`)
)

// stressExec is one cell as its client saw it.
type stressExec struct {
	client, i int
	session   string
	busy      int          // busy refusals before it was accepted
	res       *wire.Result // the reply, when accepted
	err       error        // a failure other than busy
}

// stressCounts are the figures of one run.
type stressCounts struct {
	Execs, Accepted, Busy, BusyGaveUp, Failed int
	// Misattributed replies carry another cell's token; Lost cells were
	// accepted but their own tokens never came back to their sender.
	Misattributed, Lost int
	// GaveUp replies came back still running (the exec's timeout ran out).
	GaveUp int
	// TrueNotes and FalseNotes are "finished while nobody waited" notes
	// about a cell whose own exec did, or did not, give up.
	TrueNotes, FalseNotes int
}

// stress runs clients × execs cells; client c's cell i goes to session
// sessions[(c+i) % len(sessions)].
func stress(t *testing.T, e *hubtest.Env, py string, clients, execs int, sessions []string) stressCounts {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	opts := client.ExecOptions{Timeout: stressTimeout, Python: py, Cwd: e.Cwd, Env: e.Vars}
	// The sessions exist before the clients start: their start is not
	// what is measured.
	setup := e.Client()
	for _, name := range sessions {
		res, err := setup.Exec(ctx, name, "0", opts)
		require.NoError(t, err)
		require.Equal(t, wire.StatusOK, res.Status, "%s", res.Text())
	}

	all := make([][]stressExec, clients)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for c := 0; c < clients; c++ {
		all[c] = make([]stressExec, execs)
		cl := e.Client()
		wg.Add(1)
		go func(c int, mine []stressExec) {
			defer wg.Done()
			<-start
			for i := range mine {
				x := &mine[i]
				x.client, x.i, x.session = c, i, sessions[(c+i)%len(sessions)]
				code := fmt.Sprintf("print(%q); %q", fmt.Sprintf("out-%d-%d", c, i), fmt.Sprintf("val-%d-%d", c, i))
				for try := 0; try < stressBusyTries && ctx.Err() == nil; try++ {
					res, err := cl.Exec(ctx, x.session, code, opts)
					if wire.IsCode(err, wire.CodeBusy) {
						x.busy++
						continue
					}
					x.res, x.err = res, err
					break
				}
			}
		}(c, all[c])
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	elapsed := time.Since(t0)
	require.NoError(t, ctx.Err(), "the clients did not finish in time")

	// Which exec got which cell, to judge the notes.
	type key struct {
		session string
		cell    int
	}
	byCell := map[key]*stressExec{}
	for c := range all {
		for i := range all[c] {
			if x := &all[c][i]; x.res != nil {
				byCell[key{x.session, x.res.Cell}] = x
			}
		}
	}
	var n stressCounts
	var examples []string
	example := func(format string, args ...any) {
		if len(examples) < 5 {
			examples = append(examples, fmt.Sprintf(format, args...))
		}
	}
	for c := range all {
		for i := range all[c] {
			x := &all[c][i]
			n.Execs++
			n.Busy += x.busy
			switch {
			case x.err != nil:
				n.Failed++
				example("client %d cell %d failed: %v", c, i, x.err)
				continue
			case x.res == nil:
				n.BusyGaveUp++
				continue
			}
			n.Accepted++
			res := x.res
			if res.Status == wire.StatusRunning {
				n.GaveUp++
			}
			text := res.Output
			if res.Value != nil {
				text += "\n" + *res.Value
			}
			if res.Error != nil {
				text += "\n" + res.Error.Message + "\n" + res.Error.Traceback
			}
			own := fmt.Sprintf("-%d-%d", c, i)
			foreign := false
			for _, m := range stressToken.FindAllStringSubmatch(text, -1) {
				if m[1] != strconv.Itoa(c) || m[2] != strconv.Itoa(i) {
					foreign = true
				}
			}
			if foreign {
				n.Misattributed++
				example("client %d cell %d (%s cell %d) got another cell's reply: notes %q, output %q", c, i, x.session, res.Cell, res.Notes, res.Output)
			}
			if !strings.Contains(res.Output, "out"+own) || res.Value == nil || !strings.Contains(*res.Value, "val"+own) {
				n.Lost++
				example("client %d cell %d (%s cell %d) did not get its own result: status %s, notes %q, output %q", c, i, x.session, res.Cell, res.Status, res.Notes, res.Output)
			}
			for _, note := range res.Notes {
				m := stressNote.FindStringSubmatch(note)
				if m == nil {
					continue
				}
				cell, _ := strconv.Atoi(m[1])
				if owner := byCell[key{x.session, cell}]; owner != nil && owner.res.Status == wire.StatusRunning {
					n.TrueNotes++
				} else {
					n.FalseNotes++
					example("client %d cell %d (%s) was told %q, but that cell's exec did not give up", c, i, x.session, note)
				}
			}
		}
	}
	t.Logf("%d clients × %d execs on %d sessions in %s: %+v", clients, execs, len(sessions), elapsed.Round(time.Millisecond), n)
	for _, s := range examples {
		t.Log(s)
	}
	return n
}

func checkStress(t *testing.T, n stressCounts) {
	t.Helper()
	assert.Zero(t, n.Misattributed, "replies that carried another cell's output or value")
	assert.Zero(t, n.Lost, "accepted cells whose result never came back to their sender")
	assert.Zero(t, n.FalseNotes, `"finished while nobody waited" about a cell whose exec was waiting`)
	assert.Zero(t, n.GaveUp, "execs that gave up: the timeout is far too long for that")
	assert.Zero(t, n.Failed, "execs that failed otherwise than busy")
	assert.Greater(t, n.Accepted, n.Execs/2, "most cells ran")
}

// TestStressTwoClientsOneSession: 2 clients × 1000 execs on one session.
func TestStressTwoClientsOneSession(t *testing.T) {
	e := hubtest.Start(t)
	newer, _ := hubtest.PickPythons(t)
	checkStress(t, stress(t, e, newer, 2, 1000, []string{"s0"}))
}

// TestStressManyClientsManySessions: 20 clients × 200 execs on 10 sessions.
func TestStressManyClientsManySessions(t *testing.T) {
	e := hubtest.Start(t)
	newer, _ := hubtest.PickPythons(t)
	var names []string
	for i := 0; i < 10; i++ {
		names = append(names, fmt.Sprintf("s%d", i))
	}
	checkStress(t, stress(t, e, newer, 20, 200, names))
}

// TestWaitAndExecShareNoResult: waits on a running cell and the cell's own
// exec all collect it; the first to take it gets its output and result,
// the others a reply that says so (or, if they came late, that nothing is
// left to collect), never a copy.
func TestWaitAndExecShareNoResult(t *testing.T) {
	e := hubtest.Start(t)
	newer, _ := hubtest.PickPythons(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	opts := client.ExecOptions{Timeout: stressTimeout, Python: newer, Cwd: e.Cwd, Env: e.Vars}
	c := e.Client()
	_, err := c.Exec(ctx, "w", "import time", opts)
	require.NoError(t, err)
	const rounds, waiters = 10, 3
	var went, firstExec int
	for round := 0; round < rounds; round++ {
		type reply struct {
			who string
			res *wire.Result
			err error
		}
		replies := make(chan reply, waiters+1)
		tok := fmt.Sprintf("r%d", round)
		// The cell runs long enough for the waits to be in when it ends;
		// one that comes later finds nothing to collect, which is right too.
		go func() {
			res, err := c.Exec(ctx, "w", fmt.Sprintf("time.sleep(0.2); print('out-%s'); 'val-%s'", tok, tok), opts)
			replies <- reply{"exec", res, err}
		}()
		require.Eventually(t, func() bool {
			l, err := c.Sessions(ctx)
			return err == nil && len(l.Sessions) == 1 && l.Sessions[0].RunningCell == round+2
		}, 30*time.Second, 2*time.Millisecond, "cell %d never ran", round+2)
		for i := 0; i < waiters; i++ {
			go func() {
				res, err := c.Wait(ctx, "w", stressTimeout, nil)
				replies <- reply{"wait", res, err}
			}()
		}
		var got []string
		for i := 0; i < waiters+1; i++ {
			r := <-replies
			require.NoError(t, r.err)
			text := r.res.Text()
			if strings.Contains(text, "out-"+tok) || strings.Contains(text, "val-"+tok) {
				assert.Contains(t, r.res.Output, "out-"+tok, "%s", text)
				require.NotNil(t, r.res.Value, "%s", text)
				assert.Equal(t, "'val-"+tok+"'", *r.res.Value)
				got = append(got, r.who)
				if r.who == "exec" {
					firstExec++
				}
				continue
			}
			assert.Equal(t, wire.StatusIdle, r.res.Status, "%s: %s", r.who, text)
			if strings.Contains(text, "went to another reply") {
				went++
			}
		}
		assert.Len(t, got, 1, "round %d: the replies that carried cell %d's result", round, round+2)
	}
	t.Logf("%d rounds of an exec and %d waits on one cell: the exec took it first %d times; %d replies said it went to another", rounds, waiters, firstExec, went)
}

// TestClientGoneWithAnEarlierResult: an exec that carries an earlier
// cell's unread result, whose client goes away before its own cell ends,
// leaves the hub serving.
func TestClientGoneWithAnEarlierResult(t *testing.T) {
	e := hubtest.Start(t)
	newer, _ := hubtest.PickPythons(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	opts := client.ExecOptions{Timeout: 100 * time.Millisecond, Python: newer, Cwd: e.Cwd, Env: e.Vars}
	c := e.Client()
	res, err := c.Exec(ctx, "g", "import time; time.sleep(0.3); 'late'", opts)
	require.NoError(t, err)
	require.Equal(t, wire.StatusRunning, res.Status, "%s", res.Text())
	require.Eventually(t, func() bool {
		l, err := c.Sessions(ctx)
		return err == nil && len(l.Sessions) == 1 && l.Sessions[0].Unread
	}, 10*time.Second, 5*time.Millisecond)
	gone, leave := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := c.Exec(gone, "g", "time.sleep(0.5); 'next'", client.ExecOptions{Timeout: stressTimeout, Cwd: e.Cwd, Env: e.Vars})
		done <- err
	}()
	require.Eventually(t, func() bool {
		l, err := c.Sessions(ctx)
		return err == nil && len(l.Sessions) == 1 && l.Sessions[0].RunningCell == 2
	}, 10*time.Second, 5*time.Millisecond)
	pid := e.HubPid()
	leave()
	require.ErrorIs(t, <-done, context.Canceled)
	// The cell ends after its client left; the hub goes on serving.
	res, err = c.Wait(ctx, "g", stressTimeout, nil)
	require.NoError(t, err)
	assert.Contains(t, res.Text(), "'next'")
	assert.Equal(t, pid, e.HubPid())
	assert.True(t, hubtest.Alive(pid))
}
