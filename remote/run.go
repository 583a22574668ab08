package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// RunSpec is a command to run on a connection's host, outside any session:
// the toolkit's sh(cmd, host=...).
type RunSpec struct {
	// Argv runs with no shell; a toolkit string command arrives as
	// bash --norc -o pipefail -c CMD.
	Argv []string
	// Dir, when set, is where it runs; Env adds to the login environment.
	Dir string
	Env map[string]string
	// Stdin is its whole input.
	Stdin []byte
}

// runKeep is what Run keeps of stdout and of stderr, each (head and tail).
const runKeep = 8 << 20

// RunResult is how a command ended and what it wrote.
type RunResult struct {
	Code     int // -1 when killed by a signal
	Signal   string
	Out, Err []byte
}

// Run runs spec on the host over a new channel of the connection and waits
// for it, or for ctx (the command's channel is then closed, which ends it).
func (c *Conn) Run(ctx context.Context, spec RunSpec) (*RunResult, error) {
	if len(spec.Argv) == 0 {
		return nil, errors.New("remote: run: no command")
	}
	sess, err := c.client.NewSession()
	if err != nil {
		if lost := c.LostErr(); lost != nil {
			return nil, lost
		}
		return nil, fmt.Errorf("remote: %s: opening a channel: %w", c.route.Target().Alias, err)
	}
	defer sess.Close()
	out, errw := &capped{limit: runKeep}, &capped{limit: runKeep}
	pid := &pidLine{w: errw}
	sess.Stdin, sess.Stdout, sess.Stderr = bytes.NewReader(spec.Stdin), out, pid
	done := make(chan error, 1)
	go func() { done <- sess.Run(Command(spec)) }()
	var werr error
	select {
	case werr = <-done:
	case <-ctx.Done():
		// The command leads its process group (sshd made it a session
		// leader): the group goes, what it started included. Nothing
		// here waits for the channel to close.
		c.killGroup(pid.get())
		sess.Signal(ssh.SIGKILL)
		sess.Close()
		return nil, ctx.Err()
	}
	pid.flush()
	res := &RunResult{Out: out.bytes(), Err: errw.bytes()}
	var ee *ssh.ExitError
	switch {
	case werr == nil:
	case errors.As(werr, &ee):
		res.Code = ee.ExitStatus()
		if ee.Signal() != "" {
			res.Code, res.Signal = -1, "SIG"+ee.Signal()
		}
	default:
		if lost := c.LostErr(); lost != nil {
			return nil, lost
		}
		return nil, fmt.Errorf("remote: %s: %w", c.route.Target().Alias, werr)
	}
	return res, nil
}

// Command is spec as the one line an ssh exec request carries, every word
// quoted for the login shell: cd to Dir, then env with Env, then Argv.
func Command(spec RunSpec) string {
	var b strings.Builder
	// The first line of stderr is the command's pid (see pidLine).
	b.WriteString("echo " + pidMark + "$$ >&2; ")
	if spec.Dir != "" {
		b.WriteString("cd -- " + ShellQuote(spec.Dir) + " && ")
	}
	b.WriteString("exec")
	if len(spec.Env) > 0 {
		keys := make([]string, 0, len(spec.Env))
		for k := range spec.Env {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteString(" env")
		for _, k := range keys {
			b.WriteString(" " + ShellQuote(k+"="+spec.Env[k]))
		}
	}
	for _, a := range spec.Argv {
		b.WriteString(" " + ShellQuote(a))
	}
	return b.String()
}

const pidMark = "replhub-pid "

// killGroup ends process group pid on the host, over a channel of its own,
// within a few seconds.
func (c *Conn) killGroup(pid int) {
	if pid <= 1 {
		return
	}
	sess, err := c.client.NewSession()
	if err != nil {
		return
	}
	defer sess.Close()
	done := make(chan error, 1)
	go func() { done <- sess.Run(fmt.Sprintf("kill -KILL -- -%d 2>/dev/null || kill -KILL %d", pid, pid)) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
}

// pidLine takes the command's first stderr line, its pid, and passes the
// rest on.
type pidLine struct {
	w    io.Writer
	mu   sync.Mutex
	head []byte
	done bool
	pid  int
}

func (p *pidLine) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return p.w.Write(b)
	}
	p.head = append(p.head, b...)
	i := bytes.IndexByte(p.head, '\n')
	if i < 0 && len(p.head) < 64 {
		return len(b), nil
	}
	p.done = true
	rest := p.head
	if i >= 0 && bytes.HasPrefix(p.head, []byte(pidMark)) {
		p.pid, _ = strconv.Atoi(string(p.head[len(pidMark):i]))
		rest = p.head[i+1:]
	}
	p.head = nil
	p.w.Write(rest)
	return len(b), nil
}

func (p *pidLine) get() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pid
}

// flush passes on a first line that never ended.
func (p *pidLine) flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.done {
		p.done = true
		p.w.Write(p.head)
		p.head = nil
	}
}

// ShellQuote quotes s for a POSIX shell.
func ShellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// capped keeps the first and last limit/2 bytes written to it.
type capped struct {
	limit      int
	head, tail []byte
	dropped    int64
}

func (c *capped) Write(p []byte) (int, error) {
	n := len(p)
	if room := c.limit/2 - len(c.head); room > 0 {
		k := min(room, len(p))
		c.head = append(c.head, p[:k]...)
		p = p[k:]
	}
	if len(p) > 0 {
		c.tail = append(c.tail, p...)
		// Cut back to half only past twice that: a flood costs linear time.
		if len(c.tail) > c.limit {
			c.trim()
		}
	}
	return n, nil
}

func (c *capped) trim() {
	if over := len(c.tail) - c.limit/2; over > 0 {
		c.dropped += int64(over)
		c.tail = append(c.tail[:0], c.tail[over:]...)
	}
}

func (c *capped) bytes() []byte {
	c.trim()
	if c.dropped == 0 {
		return append(c.head, c.tail...)
	}
	note := fmt.Sprintf("\n[... %d bytes left out ...]\n", c.dropped)
	return append(append(append([]byte(nil), c.head...), note...), c.tail...)
}
