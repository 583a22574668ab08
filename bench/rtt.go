package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/replhub/replhub/client"
)

func init() {
	measureAlone("rtt", "measure only a trivial cell's round trip, local, through replhub mcp and over ssh, against a pipe ping to the same Python",
		func(w *world, _ int) ([]row, error) { return rttRows(w) })
}

// rttRows measures the in-process round trip of a trivial cell (client
// package → hub → worker and back) and of one that prints, against the
// floor of two pipe hops: a line to a Python that reads it and writes one
// back. Through `replhub mcp` (an agent's way) the baseline is the
// in-process round trip; over ssh it is the local round trip plus the
// same ping through an ssh channel.
func rttRows(w *world) ([]row, error) {
	const k = 3000
	floor, err := pipePing(w.py, nil, k)
	if err != nil {
		return nil, err
	}
	var rows []row
	o := client.ExecOptions{Cwd: w.cwd, Env: w.env}
	var warm time.Duration
	for _, c := range []struct{ what, code string }{{"a trivial cell", "1"}, {"a cell that prints", "print(1)"}} {
		rt, err := cellRT(w, "rtt", c.code, k, o)
		if err != nil {
			return nil, err
		}
		if warm == 0 {
			warm = rt
		}
		rows = append(rows, row{"in-process round trip of " + c.what, us(rt), "pipe ping to python " + us(floor),
			fmt.Sprintf("%.2fx", float64(rt)/float64(floor)), "at most 150 µs"})
	}
	// A client program on one P: with an idle P beside the running one,
	// every goroutine woken also wakes a thread to look for more work
	// (the hub runs on one P for that reason).
	prev := runtime.GOMAXPROCS(1)
	one, err := cellRT(w, "rtt", "1", k, o)
	runtime.GOMAXPROCS(prev)
	if err != nil {
		return nil, err
	}
	rows = append(rows, row{"in-process round trip of a trivial cell, the client's program on one P", us(one),
		fmt.Sprintf("on %d Ps %s", prev, us(warm)), fmt.Sprintf("%.2fx", float64(one)/float64(warm)), "at most 150 µs"})
	// A session that holds an hour's work: the names it lists go with a
	// cell's done frame only when they change.
	if _, err := w.c.Exec(context.Background(), "rtt-names", "for i in range(5000): globals()['v%d' % i] = i", o); err != nil {
		return nil, err
	}
	big, err := cellRT(w, "rtt-names", "1", k, o)
	if err != nil {
		return nil, err
	}
	rows = append(rows, row{"in-process round trip of a trivial cell, session of 5,000 names", us(big),
		"an empty session " + us(warm), fmt.Sprintf("%.2fx", float64(big)/float64(warm)), "no goal"})
	// A root session: sudo passes its worker no cell pipe; its exec
	// frames come on a cell link to its socket.
	if exec.Command("sudo", "-n", "true").Run() == nil {
		ro := o
		ro.Sudo = true
		root, err := cellRT(w, "rtt-root", "1", k, ro)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row{"in-process round trip of a trivial cell, root session (`sudo -n`)", us(root),
			"a user session " + us(warm), fmt.Sprintf("%.2fx", float64(root)/float64(warm)), "no goal"})
	}
	// A person's rhythm: the session idles between cells, and every
	// thread on the way wakes from sleep.
	idle, err := cellRTAfter(w, "rtt", "1", 40, 50*time.Millisecond, o)
	if err != nil {
		return nil, err
	}
	rows = append(rows, row{"in-process round trip of a trivial cell after 50 ms idle", us(idle),
		"back to back " + us(warm), fmt.Sprintf("%.2fx", float64(idle)/float64(warm)), "no goal: the machine's wakeups"})
	m, err := mcpRT(w, k/3)
	if err != nil {
		return nil, err
	}
	rows = append(rows, row{"round trip of a trivial cell through `replhub mcp` (the MCP Go SDK's client)", us(m),
		"in-process " + us(warm), fmt.Sprintf("%.2fx", float64(m)/float64(warm)), "no goal: the MCP server's own cost"})
	rr, err := withSSHD("remote round trip", func(tb *benchTB) ([]row, error) { return remoteRTT(tb, w, k/3) })
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
	}
	return append(rows, rr...), nil
}

// mcpRT is the median round trip of the exec tool running a trivial
// cell, through a real `replhub mcp` over stdio, as an agent calls it.
func mcpRT(w *world, k int) (time.Duration, error) {
	ctx := context.Background()
	cmd := exec.Command(w.bin, "mcp")
	cmd.Env, cmd.Dir = w.env, w.cwd
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return 0, err
	}
	defer cs.Close()
	params := &sdk.CallToolParams{Name: "exec", Arguments: map[string]any{"name": "rtt-mcp", "code": "1"}}
	ds := make([]time.Duration, 0, k)
	for i := 0; i < k+10; i++ {
		t0 := time.Now()
		res, err := cs.CallTool(ctx, params)
		if err != nil {
			return 0, err
		}
		if res.IsError {
			return 0, fmt.Errorf("mcp exec: %v", res.Content)
		}
		if i >= 10 {
			ds = append(ds, time.Since(t0))
		}
	}
	return median(ds), nil
}

// cellRT is the median in-process round trip of code in session name.
func cellRT(w *world, name, code string, k int, o client.ExecOptions) (time.Duration, error) {
	return cellRTAfter(w, name, code, k, 0, o)
}

// cellRTAfter is cellRT with the session left idle for gap before each
// cell.
func cellRTAfter(w *world, name, code string, k int, gap time.Duration, o client.ExecOptions) (time.Duration, error) {
	ctx := context.Background()
	if _, err := w.c.Exec(ctx, name, code, o); err != nil {
		return 0, err
	}
	ds := make([]time.Duration, 0, k)
	for i := 0; i < k; i++ {
		time.Sleep(gap)
		t0 := time.Now()
		if _, err := w.c.Exec(ctx, name, code, o); err != nil {
			return 0, err
		}
		ds = append(ds, time.Since(t0))
	}
	return median(ds), nil
}

// pipePing is the median round trip of a line through a Python that
// echoes it, started by argv before the interpreter (ssh HOST, or none).
func pipePing(py string, prefix []string, k int) (time.Duration, error) {
	script := "import sys; r, w = sys.stdin.buffer, sys.stdout.buffer; [(w.write(l), w.flush()) for l in iter(r.readline, b'')]"
	if prefix != nil {
		script = `"` + script + `"` // through the remote shell
	}
	argv := append(append([]string(nil), prefix...), py, "-c", script)
	cmd := exec.Command(argv[0], argv[1:]...)
	in, err := cmd.StdinPipe()
	if err != nil {
		return 0, err
	}
	outp, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer func() { in.Close(); cmd.Process.Kill(); cmd.Wait() }()
	r := bufio.NewReader(outp)
	msg := []byte(`{"op":"exec","cell":1,"code":"1"}` + "\n")
	ds := make([]time.Duration, 0, k)
	for i := 0; i < k+10; i++ {
		t0 := time.Now()
		if _, err := in.Write(msg); err != nil {
			return 0, err
		}
		if _, err := r.ReadBytes('\n'); err != nil {
			return 0, fmt.Errorf("pipe ping: %v", err)
		}
		if i >= 10 {
			ds = append(ds, time.Since(t0))
		}
	}
	return median(ds), nil
}

// remoteRTT measures the warm round trip of a trivial cell in a session
// behind a loopback sshd, against the local round trip plus a pipe ping
// through ssh to the same Python.
func remoteRTT(tb *benchTB, w *world, k int) ([]row, error) {
	env, sshCfg := oneHost(tb, w, "target", filepath.Join(w.root, "rtt-home"), nil)
	saved := w.env
	defer func() { w.env, w.c.Env = saved, saved }()
	w.env, w.c.Env = env, env
	o := client.ExecOptions{Cwd: w.cwd, Env: w.env, Host: "target", Python: w.py}
	local, err := cellRT(w, "rtt-local", "1", k, client.ExecOptions{Cwd: w.cwd, Env: w.env})
	if err != nil {
		return nil, err
	}
	rt, err := cellRT(w, "rtt-remote", "1", k, o)
	if err != nil {
		return nil, err
	}
	ping, err := pipePing(w.py, []string{"ssh", "-F", sshCfg, "target"}, k)
	if err != nil {
		return nil, err
	}
	return []row{{"warm round trip of a trivial remote cell", us(rt), fmt.Sprintf("local %s + pipe ping through ssh %s", us(local), us(ping)),
		fmt.Sprintf("%.2fx", float64(rt)/float64(local+ping)), "at most 350 µs"}}, nil
}
