// Package lean is what a warm `replhub exec NAME CODE` needs, and nothing
// else: the hub socket's folder and its checks, the dial with its peer
// check, a plain request's bytes, a plain reply's text, and on a terminal
// the output and progress before it (news.go, screen.go). Package early
// runs that call with it from an init function, and config, safesock and
// wire build on it, so that both ways share one definition of each.
//
// Go initializes a package only once no other package that sorts before it
// by import path is ready to initialize (the spec's "Package
// initialization"). A package that imports strings, bufio, net or
// encoding/json waits for the inits of every ready package sorting before
// those: crypto, compress, encoding/gob, the MCP SDK's, a third of the
// binary's. So lean imports only packages Go initializes before any of
// those (bytes, errors, fmt, io, math, os, os/signal, path, strconv, sync,
// sync/atomic, syscall, time, unicode/utf8), and package early little more;
// tests/startup_test.go checks the order with GODEBUG=inittrace.
package lean

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"strconv"
	"syscall"
	"unicode/utf8"
)

// Version is the binary's version; set at build time with
// -ldflags "-X github.com/replhub/replhub/internal/lean.Version=V".
var Version = "0.1.0-dev"

// Protocol is the version of the protocol between clients and the hub
// (wire.Version).
const Protocol = 2

// MaxLine bounds one JSON line of that protocol, either way (wire.MaxLine).
const MaxLine = 64 << 20

// DefaultTimeout is how many seconds exec and wait wait when -t is not
// given.
const DefaultTimeout = 30

// MaxTimeout is the most seconds -t may give (hub.MaxTimeout).
const MaxTimeout = 600

// MaxOutput is the most characters --max-output may ask one reply to
// carry (hub.MaxReplyCap); 0 is the hub's default.
const MaxOutput = 2_000_000

// DefaultQueryWait is how many seconds a query waits for a running cell
// when --wait is not given (wire.DefaultQueryWait).
const DefaultQueryWait = 2.0

// TimeoutOK reports whether -t's seconds are more than 0 and at most
// MaxTimeout (so not NaN).
func TimeoutOK(t float64) bool { return t > 0 && t <= MaxTimeout }

// CodeTooBig is the error for code on standard input that one request
// cannot carry.
const CodeTooBig = "the code on stdin is over 64 MiB: put it in a file and run it there (exec(open(PATH).read())), pushing it first if the session is remote"

// ReadCode reads the code of `exec NAME -` from in, up to what one
// request carries: more is refused (CodeTooBig), not read to the end.
func ReadCode(in io.Reader) (string, error) {
	b, err := io.ReadAll(io.LimitReader(in, MaxLine+1))
	if err != nil {
		return "", fmt.Errorf("reading code from stdin: %w", err)
	}
	if len(b) > MaxLine {
		return "", errors.New(CodeTooBig)
	}
	if !utf8.Valid(b) {
		// Sent as it is, each bad byte would become U+FFFD and run, where
		// Python refuses such a file.
		at := 0
		for r, n := utf8.DecodeRune(b); r != utf8.RuneError || n > 1; r, n = utf8.DecodeRune(b[at:]) {
			at += n
		}
		return "", fmt.Errorf("the code on stdin is not UTF-8 text (byte %d is not): convert it first, e.g. iconv -f latin1 -t utf-8", at+1)
	}
	return string(b), nil
}

// SocketName is the hub's socket's name in its folder.
const SocketName = "hub.sock"

// RuntimeDir is the folder of the hub's socket, log and pid file:
// $XDG_RUNTIME_DIR/replhub, or replhub-UID in the temporary folder;
// fromXDG says which.
func RuntimeDir(getenv func(string) string) (dir string, fromXDG bool) {
	if rt := getenv("XDG_RUNTIME_DIR"); rt != "" {
		return path.Join(rt, "replhub"), true
	}
	return path.Join(os.TempDir(), "replhub-"+strconv.Itoa(os.Getuid())), false
}

// FolderError reports a socket folder that is not safe to use, with the
// fix in Advice.
type FolderError struct {
	Dir    string
	Reason string
	Advice string
}

func (e *FolderError) Error() string {
	return fmt.Sprintf("safesock: socket folder %s %s; %s", e.Dir, e.Reason, e.Advice)
}

// CheckDir checks an existing socket folder without changing it: a real
// folder, ours, that nobody else may enter. A folder in the wrong state is
// a *FolderError.
func CheckDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("safesock: %w", err)
	}
	if fi.Mode()&os.ModeSymlink != 0 || !fi.IsDir() {
		return &FolderError{dir, "is not a real folder", "remove it, or set XDG_RUNTIME_DIR to a folder of your own"}
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if ok && int(st.Uid) != os.Getuid() {
		return &FolderError{dir, fmt.Sprintf("is owned by uid %d, not by you (uid %d)", st.Uid, os.Getuid()),
			"remove it, or set XDG_RUNTIME_DIR to a folder of your own"}
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return &FolderError{dir, fmt.Sprintf("has mode %04o, open to others", perm),
			fmt.Sprintf("run: chmod 700 %s", dir)}
	}
	return nil
}

// ErrUnsupported is Dial's error where it has no way to check its peer.
var ErrUnsupported = errors.New("lean: no peer check on this system")

// InterruptNote is what a client prints when a first Ctrl-C interrupts
// session name's cell.
func InterruptNote(name string) string {
	return "[interrupting session '" + name + "'; Ctrl-C again stops waiting]"
}

// The CLI's exit codes that package early needs, as wire's (a test in
// wire holds them equal).
const (
	ExitFailure = 2
	ExitRunning = 3
)

// StoppedWaiting is what a second Ctrl-C on an exec or a wait of session
// name says, as the command ends with ExitRunning: the cell runs on.
func StoppedWaiting(name string) string {
	return "stopped waiting at the second Ctrl-C; the cell runs on in session '" + name + "': `replhub wait " + name + "` collects it"
}

// RunInterruptNote is InterruptNote for a run (`replhub run`), whose
// session ends with it; RunStopped is the error a second Ctrl-C ends a
// run with.
const (
	RunInterruptNote = "[interrupting the cell; Ctrl-C again ends the run at once]"
	RunStopped       = "stopped at the second Ctrl-C; the run's session ended with it"
)

// RunName is a run's session name, new and told to nobody: "run-" and 16
// hex digits of 8 bytes read from random.
func RunName(random io.Reader) (string, error) {
	var b [8]byte
	if _, err := io.ReadFull(random, b[:]); err != nil {
		return "", err
	}
	const hex = "0123456789abcdef"
	name := []byte("run-")
	for _, x := range b {
		name = append(name, hex[x>>4], hex[x&15])
	}
	return string(name), nil
}

// Request is the part of a request a plain call sets: wire.Request's
// fields of these JSON names.
type Request struct {
	Op          string
	Name        string
	Code        string
	Timeout     float64
	NoWait      bool
	Cell        int
	Queue       bool
	Python      string
	Cwd         string
	Env         []string
	Host        string
	Sudo        bool
	Expr        string
	Text        string
	All         bool
	KeepImports bool
	MaxOutput   int
	Private     bool
	Limit       int
	Wait        float64
	Progress    bool
	Stream      bool
	Plain       bool
	JSON        bool
}

// AppendRequest appends req's JSON line as encoding/json writes a
// wire.Request with only these fields set (the protocol version in "v"),
// newline included; false for a timeout JSON cannot hold (NaN, ±Inf).
func AppendRequest(b []byte, req Request) ([]byte, bool) {
	if math.IsNaN(req.Timeout) || math.IsInf(req.Timeout, 0) || math.IsNaN(req.Wait) || math.IsInf(req.Wait, 0) {
		return b, false
	}
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, Protocol, 10)
	b = append(b, `,"op":`...)
	b = AppendString(b, req.Op)
	if req.Name != "" {
		b = AppendString(append(b, `,"name":`...), req.Name)
	}
	if req.Code != "" {
		b = AppendString(append(b, `,"code":`...), req.Code)
	}
	if req.Timeout != 0 {
		b = appendFloat(append(b, `,"timeout":`...), req.Timeout)
	}
	if req.NoWait {
		b = append(b, `,"no_wait":true`...)
	}
	if req.Cell != 0 {
		b = strconv.AppendInt(append(b, `,"cell":`...), int64(req.Cell), 10)
	}
	if req.Queue {
		b = append(b, `,"queue":true`...)
	}
	if req.Python != "" {
		b = AppendString(append(b, `,"python":`...), req.Python)
	}
	if req.Cwd != "" {
		b = AppendString(append(b, `,"cwd":`...), req.Cwd)
	}
	if len(req.Env) > 0 {
		b = append(b, `,"env":[`...)
		for i, kv := range req.Env {
			if i > 0 {
				b = append(b, ',')
			}
			b = AppendString(b, kv)
		}
		b = append(b, ']')
	}
	if req.Host != "" {
		b = AppendString(append(b, `,"host":`...), req.Host)
	}
	if req.Sudo {
		b = append(b, `,"sudo":true`...)
	}
	if req.Progress {
		b = append(b, `,"progress":true`...)
	}
	if req.Expr != "" {
		b = AppendString(append(b, `,"expr":`...), req.Expr)
	}
	if req.Text != "" {
		b = AppendString(append(b, `,"text":`...), req.Text)
	}
	if req.All {
		b = append(b, `,"all":true`...)
	}
	if req.KeepImports {
		b = append(b, `,"keep_imports":true`...)
	}
	if req.MaxOutput != 0 {
		b = strconv.AppendInt(append(b, `,"max_output":`...), int64(req.MaxOutput), 10)
	}
	if req.Private {
		b = append(b, `,"private":true`...)
	}
	if req.Limit != 0 {
		b = strconv.AppendInt(append(b, `,"limit":`...), int64(req.Limit), 10)
	}
	if req.Wait != 0 {
		b = appendFloat(append(b, `,"wait":`...), req.Wait)
	}
	if req.Stream {
		b = append(b, `,"stream":true`...)
	}
	if req.Plain {
		b = append(b, `,"plain":true`...)
	}
	if req.JSON {
		b = append(b, `,"json":true`...)
	}
	return append(b, "}\n"...), true
}

// IsNeedEnv reports whether line is the hub's error reply saying that the
// session is new and the request must carry the caller's folder and
// environment (wire.CodeNeedEnv): nothing ran.
func IsNeedEnv(line []byte) bool {
	_, b, ok := replyVersion(line)
	if ok {
		_, ok = skip(b, `,"err":{"code":"need_env",`)
	}
	return ok
}

// appendFloat is encoding/json's float64: the shortest text that reads
// back the same, in exponent form below 1e-6 and from 1e21.
func appendFloat(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

const hexDigits = "0123456789abcdef"

// AppendString appends s as encoding/json writes a string: HTML's <, >
// and & escaped, invalid UTF-8 as U+FFFD, U+2028 and U+2029 escaped.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(append(b, s[start:i]...), `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(append(b, s[start:i]...), '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(append(b, s[start:]...), '"')
}

// ParsePlain reads a reply line that holds a plain result, as the hub
// writes wire.Reply{V, Plain: {Exit, Text}} (newline optional): the
// protocol version, the exit code and the text. ok is false for any
// other line, and for one it reads otherwise than encoding/json would
// (invalid UTF-8), which the caller then hands to encoding/json.
func ParsePlain(line []byte) (v, exit int, text string, ok bool) {
	v, b, ok := replyVersion(line)
	if ok {
		b, ok = skip(b, `,"plain":{"exit":`)
	}
	if ok {
		exit, b, ok = parseInt(b)
	}
	if ok {
		b, ok = skip(b, `,"text":`)
	}
	if ok {
		text, b, ok = parseString(b)
	}
	if ok {
		b, ok = skip(b, `}}`)
	}
	if !ok || len(b) > 1 || len(b) == 1 && b[0] != '\n' {
		return 0, 0, "", false
	}
	return v, exit, text, true
}

// replyVersion reads the start of a reply line, `{"v":N`, as the hub
// writes every reply: the protocol version and what follows it.
func replyVersion(line []byte) (v int, rest []byte, ok bool) {
	b, ok := skip(line, `{"v":`)
	if !ok {
		return 0, line, false
	}
	return parseInt(b)
}

func skip(b []byte, prefix string) ([]byte, bool) {
	if len(b) < len(prefix) || string(b[:len(prefix)]) != prefix {
		return b, false
	}
	return b[len(prefix):], true
}

// parseInt reads a JSON integer of at most 9 digits.
func parseInt(b []byte) (n int, rest []byte, ok bool) {
	n, rest, ok = parseWholeInt(b)
	if ok && (n > 999_999_999 || n < -999_999_999) {
		return 0, b, false
	}
	return n, rest, ok
}

// parseWholeInt reads a JSON integer that an int holds, as encoding/json
// reads one into an int: no fraction, no exponent after it is the
// caller's to refuse.
func parseWholeInt(b []byte) (n int, rest []byte, ok bool) {
	i := 0
	if len(b) > 0 && b[0] == '-' {
		i = 1
	}
	start := i
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
	}
	if i == start || i-start > 1 && b[start] == '0' {
		return 0, b, false
	}
	n64, err := strconv.ParseInt(string(b[:i]), 10, strconv.IntSize)
	if err != nil {
		return 0, b, false
	}
	return int(n64), b[i:], true
}

// parseString reads a JSON string as encoding/json does, but for invalid
// UTF-8, which it refuses.
func parseString(b []byte) (s string, rest []byte, ok bool) {
	if len(b) == 0 || b[0] != '"' {
		return "", b, false
	}
	out := make([]byte, 0, len(b))
	for i := 1; i < len(b); {
		c := b[i]
		switch {
		case c == '"':
			return string(out), b[i+1:], true
		case c < 0x20:
			return "", b, false
		case c == '\\':
			if i+1 >= len(b) {
				return "", b, false
			}
			switch e := b[i+1]; e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r, ok := hex4(b[i+2:])
				if !ok {
					return "", b, false
				}
				i += 6
				if r >= 0xd800 && r < 0xe000 {
					// A surrogate: a high one with a low one after it
					// is a pair; any other is U+FFFD.
					r2, ok2 := rune(0), false
					if r < 0xdc00 && i+1 < len(b) && b[i] == '\\' && b[i+1] == 'u' {
						r2, ok2 = hex4(b[i+2:])
					}
					if ok2 && r2 >= 0xdc00 && r2 < 0xe000 {
						r = (r-0xd800)<<10 | (r2 - 0xdc00) + 0x10000
						i += 6
					} else {
						r = utf8.RuneError
					}
				}
				out = utf8.AppendRune(out, r)
				continue
			default:
				return "", b, false
			}
			i += 2
		case c < utf8.RuneSelf:
			out = append(out, c)
			i++
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				return "", b, false
			}
			out = append(out, b[i:i+size]...)
			i += size
		}
	}
	return "", b, false
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
