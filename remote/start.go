package remote

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/replhub/replhub/boot"
	"github.com/replhub/replhub/internal/lazyre"
	"github.com/replhub/replhub/sudo"
)

// DefaultPythons are tried after the caller's and the config's.
var DefaultPythons = []string{
	"python3.14", "python3.13", "python3.12", "python3.11", "python3.10", "python3.9",
	"python3.8", "python3.7", "python3.6", "python3", "/usr/libexec/platform-python", "python",
}

// validPython is what a python entry may look like before it goes into the
// finder script: a name, a path, a folder or a glob; no quotes, spaces or
// shell syntax beyond glob characters.
var validPython = lazyre.New(`^(~/)?[A-Za-z0-9._/*?\[\]+-]{1,255}$`)

var validMinor = lazyre.New(`^3\.[0-9]{1,2}$`)

// StartSpec says how to start a worker.
type StartSpec struct {
	// Pythons are tried in order before DefaultPythons.
	Pythons []string
	// Python, when set, is the one interpreter to use; nothing else is tried.
	Python string
	// Prefer is the major.minor to prefer ("3.11"); empty means the first found.
	Prefer string
	// Payload is the framed payload (package payload).
	Payload []byte
	// Sudo starts the worker as root: SudoTry (`sudo -n`) or SudoPassword
	// (`sudo -k -S -p Prompt`, Password sent right after the finder's
	// marker, the payload only once the stub runs: see Worker.SendPayload).
	Sudo   string
	Prompt string
	// Password is the caller's to zero; StartWorker keeps no copy.
	Password []byte
}

// Sudo modes of StartSpec.
const (
	SudoTry      = "n"
	SudoPassword = "S"
)

var validPrompt = lazyre.New(`^[][A-Za-z0-9 :._-]{1,80}$`)

// Script renders the finder script for spec with marker token.
func Script(spec StartSpec, token string) (string, error) {
	quote := func(s string) string { return "'" + s + "'" }
	// The preferred minor's own name is tried first among the defaults,
	// then the version managers' folders for it, so that the usual start
	// runs no interpreter just to ask its version.
	var preferred []string
	defaults := DefaultPythons
	if spec.Prefer != "" {
		own := "python" + spec.Prefer
		preferred = []string{own}
		defaults = slices.DeleteFunc(slices.Clone(DefaultPythons), func(p string) bool { return p == own })
	}
	quoted := func(list []string) (string, error) {
		var out []string
		for _, p := range list {
			if !validPython.MatchString(p) {
				return "", fmt.Errorf("remote: python %q: use a name, a path, a folder or a glob (letters, digits, ./_-+*?[])", p)
			}
			out = append(out, quote(p))
		}
		return strings.Join(out, " "), nil
	}
	var lists [3]string
	for i, l := range [][]string{spec.Pythons, preferred, defaults} {
		q, err := quoted(l)
		if err != nil {
			return "", err
		}
		lists[i] = q
	}
	pinned := ""
	if spec.Python != "" {
		if !validPython.MatchString(spec.Python) || strings.ContainsAny(spec.Python, "*?[") {
			return "", fmt.Errorf("remote: --python %q: give one interpreter's name or path", spec.Python)
		}
		pinned = spec.Python
	}
	if spec.Prefer != "" && !validMinor.MatchString(spec.Prefer) {
		return "", fmt.Errorf("remote: bad preferred version %q", spec.Prefer)
	}
	if strings.Contains(boot.Stub, "'") {
		return "", errors.New("remote: the stub holds a single quote")
	}
	switch spec.Sudo {
	case "", SudoTry:
	case SudoPassword:
		if !validPrompt.MatchString(spec.Prompt) {
			return "", fmt.Errorf("remote: bad sudo prompt %q", spec.Prompt)
		}
	default:
		return "", fmt.Errorf("remote: bad sudo mode %q", spec.Sudo)
	}
	r := strings.NewReplacer(
		"@SUDO@", quote(spec.Sudo),
		"@PROMPT@", quote(spec.Prompt),
		"@TOKEN@", quote(token),
		"@PREFER@", quote(spec.Prefer),
		"@PINNED@", quote(pinned),
		"@CANDIDATES@", lists[0],
		"@PREFERRED@", lists[1],
		"@DEFAULTS@", lists[2],
		"@STUB@", boot.Stub,
	)
	return r.Replace(boot.Finder), nil
}

// StartError is a worker that could not be started; Said is what the host
// printed before it failed (rc-file noise included), for the user to read.
type StartError struct {
	Host   string
	Reason string
	Said   string
}

func (e *StartError) Error() string {
	s := fmt.Sprintf("remote: no session on %s: %s", e.Host, e.Reason)
	if e.Said != "" {
		s += "; it said:\n" + e.Said
	}
	return s
}

// Worker is a worker process on a channel of a route's connection. Its
// streams are the worker's frames and output, exactly as a local child's.
type Worker struct {
	conn    *Conn
	sess    *ssh.Session
	stdin   *channelStdin
	stdout  io.Reader
	stderr  io.Reader
	Python  string // the interpreter the finder chose
	Version string // its major.minor, or "pinned"
	once    sync.Once
	sent    sync.Once
	payload []byte
}

// StartWorker opens a channel running `exec /bin/sh -s`, sends the finder
// script, waits for its marker, then sends the payload. Lines before the
// marker are noise (banners, rc files that echo) and are shown only if the
// start fails. The caller reads the ready frame from Stdout.
func (c *Conn) StartWorker(ctx context.Context, spec StartSpec) (*Worker, error) {
	host := c.route.Target().Alias
	var tok [8]byte
	rand.Read(tok[:])
	token := hex.EncodeToString(tok[:])
	script, err := Script(spec, token)
	if err != nil {
		return nil, err
	}
	sess, err := c.client.NewSession()
	if err != nil {
		if lost := c.LostErr(); lost != nil {
			return nil, lost
		}
		return nil, fmt.Errorf("remote: %s: opening a channel: %w", host, err)
	}
	pipe, err1 := sess.StdinPipe()
	stdin := &channelStdin{w: pipe}
	stdout, err2 := sess.StdoutPipe()
	stderr, err3 := sess.StderrPipe()
	if err := errors.Join(err1, err2, err3); err != nil {
		sess.Close()
		return nil, fmt.Errorf("remote: %s: %w", host, err)
	}
	// What the host writes to stderr before the worker runs (rc files) is
	// read by the hub as session output once the worker is up; on a failed
	// start it is collected here to explain the failure.
	fail := func(reason string, noise string) (*Worker, error) {
		sess.Close()
		errText := make(chan string, 1)
		go func() {
			b, _ := io.ReadAll(io.LimitReader(stderr, 64<<10))
			errText <- string(b)
		}()
		said := noise
		select {
		case e := <-errText:
			said += e
		case <-time.After(2 * time.Second):
		}
		if lost := c.LostErr(); lost != nil {
			reason = lost.Error()
		}
		return nil, &StartError{Host: host, Reason: reason, Said: tail(strings.TrimSpace(said), 20)}
	}
	if err := sess.Start("exec /bin/sh -s"); err != nil {
		return fail(fmt.Sprintf("cannot run /bin/sh: %v", err), "")
	}
	if _, err := io.WriteString(stdin, script); err != nil {
		return fail(fmt.Sprintf("sending the start script: %v", err), "")
	}
	br := bufio.NewReaderSize(stdout, 64<<10)
	var noise bytes.Buffer
	type found struct {
		line string
		err  error
	}
	got := make(chan found, 1)
	go func() {
		line, err := readMarker(br, "REPLHUB-"+token+" ", &noise)
		got <- found{line, err}
	}()
	var f found
	select {
	case f = <-got:
	case <-ctx.Done():
		sess.Close()
		<-got
		return fail("gave up waiting for the start script: "+ctx.Err().Error(), noise.String())
	}
	if errors.Is(f.err, errTooMuchNoise) {
		return fail(f.err.Error(), noise.String())
	}
	if f.err != nil {
		return fail("the start script ended before it found a Python", noise.String())
	}
	fields := strings.SplitN(f.line, " ", 3)
	switch fields[0] {
	case "FOUND":
	case "MISSING":
		return fail(fmt.Sprintf("python %s is not there (or not executable)", spec.Python), noise.String())
	case "NOPYTHON":
		tried := ""
		if len(fields) > 1 {
			tried = strings.TrimSpace(strings.Join(fields[1:], " "))
		}
		if tried == "" {
			tried = "no candidate exists"
		}
		return fail(fmt.Sprintf("no Python 3.6 or newer found (tried: %s); pass --python PATH or --pythons", tried), noise.String())
	default:
		return fail("unexpected start marker: "+clip(f.line), noise.String())
	}
	if len(fields) < 3 {
		return fail("malformed start marker: "+clip(f.line), noise.String())
	}
	w := &Worker{conn: c, sess: sess, stdin: stdin, stdout: br, stderr: stderr,
		Version: fields[1], Python: fields[2], payload: spec.Payload}
	if spec.Sudo == SudoPassword {
		line := sudo.Line(spec.Password)
		_, err := stdin.Write(line)
		sudo.Zero(line)
		if err != nil {
			return fail(fmt.Sprintf("sending the password to sudo: %v", err), noise.String())
		}
	}
	if spec.Sudo != "" {
		// The caller sends the payload when the stub runs (SendPayload);
		// until then sudo's verdict is what matters.
		return w, nil
	}
	if err := w.SendPayload(); err != nil {
		return fail(fmt.Sprintf("sending the payload: %v", err), noise.String())
	}
	return w, nil
}

// What a host may print before the start script's marker (banners, rc
// files that echo): the bytes, and the length of the marker's line kept.
// Past maxBeforeMarker the start fails, so that a host that prints
// without end, or one line without end, costs the hub nothing.
const (
	maxBeforeMarker = 1 << 20
	maxMarkerLine   = 4 << 10
	maxNoise        = 64 << 10
)

var errTooMuchNoise = fmt.Errorf("the host printed more than %d KiB before the start script's marker (an rc file that does not end?)", maxBeforeMarker>>10)

// readMarker reads r up to the line that starts with marker and returns
// the rest of it, trimmed; the lines before it are noise, of which the
// first maxNoise bytes go to noise, to explain a failed start. A line is
// read in pieces, of which the first maxMarkerLine bytes are kept.
func readMarker(r *bufio.Reader, marker string, noise *bytes.Buffer) (string, error) {
	var line []byte
	for read := 0; read <= maxBeforeMarker; {
		part, err := r.ReadSlice('\n')
		read += len(part)
		if keep := min(len(part), maxMarkerLine-len(line)); keep > 0 {
			line = append(line, part[:keep]...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if bytes.HasPrefix(line, []byte(marker)) {
			return strings.TrimSpace(string(line[len(marker):])), nil
		}
		if room := maxNoise - noise.Len(); room > 0 {
			noise.Write(line[:min(len(line), room)])
		}
		if err != nil {
			return "", err
		}
		line = line[:0]
	}
	return "", errTooMuchNoise
}

// clip is s cut to 200 bytes, for a message.
func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

// SendPayload sends the payload to the stub, once. For a sudo start with a
// password the caller calls it when the stub says it runs (sudo accepted
// the password), so that the payload is never read as a second password.
func (w *Worker) SendPayload() error {
	var err error
	w.sent.Do(func() { _, err = w.stdin.Write(w.payload) })
	return err
}

// Stdin carries frames to the worker.
func (w *Worker) Stdin() io.WriteCloser { return w.stdin }

// Stdout carries the worker's frames (and, before ready, noise).
func (w *Worker) Stdout() io.Reader { return w.stdout }

// Stderr is the session's output.
func (w *Worker) Stderr() io.Reader { return w.stderr }

// Conn is the connection the worker runs on.
func (w *Worker) Conn() *Conn { return w.conn }

// Wait blocks until the worker's channel ends and says how: the exit
// status, the signal, or the lost link.
func (w *Worker) Wait() (code int, signal string, err error) {
	werr := w.sess.Wait()
	if lost := w.conn.LostErr(); lost != nil {
		return -1, "", lost
	}
	var ee *ssh.ExitError
	switch {
	case werr == nil:
		return 0, "", nil
	case errors.As(werr, &ee):
		if ee.Signal() != "" {
			return -1, "SIG" + ee.Signal(), nil
		}
		return ee.ExitStatus(), "", nil
	}
	var em *ssh.ExitMissingError
	if errors.As(werr, &em) {
		// The channel closed with no status: the link went down under it,
		// which the connection learns a moment later.
		select {
		case <-w.conn.lost:
		case <-time.After(time.Second):
		}
		if lost := w.conn.LostErr(); lost != nil {
			return -1, "", lost
		}
		return -1, "", fmt.Errorf("the channel to %s closed without an exit status", w.conn.route.Target().Alias)
	}
	return -1, "", werr
}

// Kill ends the worker: closing its stdin makes it exit (it exits on EOF),
// and the channel is closed in case it cannot.
func (w *Worker) Kill() error {
	w.sess.Signal(ssh.SIGKILL)
	w.stdin.Close()
	return w.sess.Close()
}

// channelStdin is a worker's stdin on its channel. x/crypto/ssh's
// CloseWrite sets a flag that a Write reads without a lock, so the two
// never run at once here: a Close while a write is under way (one the
// worker is slow to take) leaves the EOF to the channel's close, which
// Kill does next, rather than wait for the write.
type channelStdin struct {
	mu sync.Mutex
	w  io.WriteCloser
}

func (c *channelStdin) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.w.Write(b)
}

func (c *channelStdin) Close() error {
	if !c.mu.TryLock() {
		return nil
	}
	defer c.mu.Unlock()
	return c.w.Close()
}

// Close releases the worker's hold on the connection.
func (w *Worker) Close() error {
	w.once.Do(w.conn.Release)
	return nil
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
