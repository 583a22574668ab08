package hub

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Output caps (issue: "Caps").
const (
	// ReplyCap is the most output characters one reply carries; head and
	// tail are kept, the middle is counted.
	ReplyCap = 30000
	// UnreadCap is the most unread output kept per session; older output
	// beyond the head is dropped and counted.
	UnreadCap = 2_000_000
	// MaxReplyCap is the most a caller may ask one reply to carry
	// (exec --max-output): all a session keeps.
	MaxReplyCap = UnreadCap
	// headKeep is how much of the start of unread output is always kept, so
	// that a reply after a flood still shows how it began.
	headKeep = ReplyCap / 2
)

// outBuf holds a session's unread output: its first headKeep bytes, and its
// last bytes up to UnreadCap in all. Bytes between the two are dropped and
// counted. Not safe for concurrent use; the session's mutex guards it.
type outBuf struct {
	head    []byte
	tail    []byte // tail[start:] is live; compacted when start grows large
	start   int
	dropped int64
}

func (b *outBuf) len() int { return len(b.head) + len(b.tail) - b.start }

func (b *outBuf) write(p []byte) {
	if b.dropped == 0 && len(b.tail) == b.start && len(b.head) < headKeep {
		n := min(headKeep-len(b.head), len(p))
		b.head = append(b.head, p[:n]...)
		p = p[n:]
	}
	if len(p) == 0 {
		return
	}
	b.tail = append(b.tail, p...)
	if over := b.len() - UnreadCap; over > 0 {
		b.start += over
		b.dropped += int64(over)
	}
	if b.start > UnreadCap {
		b.tail = append([]byte(nil), b.tail[b.start:]...)
		b.start = 0
	}
}

// outputs is a session's unread output: merged in the order written, and
// each stream apart, every one kept and capped as an outBuf.
type outputs struct {
	all, stdout, stderr outBuf
	// tap, when set, sees every write first (watch.go); when it returns
	// true, a reader took the bytes and no buffer keeps them.
	tap func(p []byte) bool
}

// output is outputs made ready for a reply.
type output struct{ all, stdout, stderr rendered }

func (o *outputs) len() int { return o.all.len() }

func (o *outputs) write(stdout bool, p []byte) {
	if len(p) == 0 || (o.tap != nil && o.tap(p)) {
		return
	}
	o.all.write(p)
	if stdout {
		o.stdout.write(p)
	} else {
		o.stderr.write(p)
	}
}

// rawOutputs is outputs taken out, not yet rendered.
type rawOutputs struct{ all, stdout, stderr rawOut }

// takeOut empties the buffers and returns what they held.
func (o *outputs) takeOut() rawOutputs {
	return rawOutputs{all: o.all.takeOut(), stdout: o.stdout.takeOut(), stderr: o.stderr.takeOut()}
}

// take renders the unread output for a reply under ReplyCap and empties
// the buffers.
func (o *outputs) take() output { return o.takeCap(ReplyCap) }

// takeCap is take under a cap of limit characters, each stream alike.
func (o *outputs) takeCap(limit int) output {
	r := o.takeOut()
	return r.render(limit)
}

// render renders each under a cap of limit characters.
func (r *rawOutputs) render(limit int) output {
	one := func(o rawOut) rendered { return render(o.head, o.tail, o.dropped, limit) }
	return output{all: one(r.all), stdout: one(r.stdout), stderr: one(r.stderr)}
}

// rendered is output made ready for a reply.
type rendered struct {
	text           string
	truncated      bool
	truncatedChars int
	notes          []string
}

// takeRaw empties the buffer and returns its bytes and how many were
// dropped between head and tail.
func (b *outBuf) takeRaw() ([]byte, int64) {
	out := append(append([]byte(nil), b.head...), b.tail[b.start:]...)
	dropped := b.dropped
	*b = outBuf{}
	return out, dropped
}

// rawOut is unread output taken out of a buffer, not yet rendered: a
// reply renders it under its caller's cap.
type rawOut struct {
	head, tail []byte
	dropped    int64
}

// takeOut empties the buffer and returns what it held.
func (b *outBuf) takeOut() rawOut {
	o := rawOut{b.head, b.tail[b.start:], b.dropped}
	*b = outBuf{}
	return o
}

// take renders the unread output for a reply under ReplyCap and empties
// the buffer.
func (b *outBuf) take() rendered { return b.takeCap(ReplyCap) }

// takeCap is take under a cap of limit characters.
func (b *outBuf) takeCap(limit int) rendered {
	o := b.takeOut()
	return render(o.head, o.tail, o.dropped, limit)
}

// capOf is the output cap of a request's max_output: ReplyCap when unset.
func capOf(maxOutput int) int {
	if maxOutput <= 0 {
		return ReplyCap
	}
	return min(maxOutput, MaxReplyCap)
}

// render turns raw output into reply text: invalid UTF-8 becomes U+FFFD, NUL
// bytes become ␀, and more than limit characters keep head and tail with
// a line saying how much was left out.
func render(head, tail []byte, dropped int64, limit int) rendered {
	var r rendered
	var bad, nuls int
	clean := func(p []byte) string {
		if utf8.Valid(p) && !containsNUL(p) {
			return string(p)
		}
		var sb strings.Builder
		for len(p) > 0 {
			c, n := utf8.DecodeRune(p)
			switch {
			case c == utf8.RuneError && n <= 1:
				bad++
				sb.WriteRune(utf8.RuneError)
			case c == 0:
				nuls++
				sb.WriteRune('␀')
			default:
				sb.Write(p[:n])
			}
			p = p[n:]
		}
		return sb.String()
	}
	h, t := clean(head), clean(tail)
	if bad > 0 {
		r.notes = append(r.notes, fmt.Sprintf("output had %d bytes that are not UTF-8, shown as �", bad))
	}
	if nuls > 0 {
		r.notes = append(r.notes, fmt.Sprintf("output had %d NUL bytes, shown as ␀", nuls))
	}
	if dropped > 0 {
		r.notes = append(r.notes, fmt.Sprintf("%d characters of unread output were dropped (a session keeps at most %d)", dropped, UnreadCap))
	}
	hn, tn := utf8.RuneCountInString(h), utf8.RuneCountInString(t)
	if dropped == 0 && hn+tn <= limit {
		r.text = h + t
		return r
	}
	// Keep half the cap from each end; after a drop the head holds at
	// most headKeep, and the tail gets the rest of the cap.
	if dropped == 0 {
		h, hn, t, tn = h+t, hn+tn, "", 0
	}
	first := prefixRunes(h, limit/2)
	fn := utf8.RuneCountInString(first)
	rest := t
	if dropped == 0 {
		rest = h[len(first):]
	}
	last := suffixRunes(rest, limit-fn)
	left := hn + tn - fn - utf8.RuneCountInString(last) + int(dropped)
	r.truncated = true
	r.truncatedChars = left
	nl := ""
	if !strings.HasSuffix(first, "\n") {
		nl = "\n"
	}
	r.text = fmt.Sprintf("%s%s[... %d characters left out ...]\n%s", first, nl, left, last)
	return r
}

func containsNUL(p []byte) bool {
	for _, c := range p {
		if c == 0 {
			return true
		}
	}
	return false
}

func prefixRunes(s string, n int) string {
	i := 0
	for pos := range s {
		if i == n {
			return s[:pos]
		}
		i++
	}
	return s
}

func suffixRunes(s string, n int) string {
	i := len(s)
	for k := 0; k < n && i > 0; k++ {
		_, size := utf8.DecodeLastRuneInString(s[:i])
		i -= size
	}
	return s[i:]
}
