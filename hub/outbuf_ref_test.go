package hub

// The three-buffer model of unread output that outBuf replaced, kept as
// the reference its tests compare with: each of merged, stdout and stderr
// kept apart, each its first headKeep bytes and its last bytes up to
// UnreadCap, rendered from whole strings.

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"
)

type refBuf struct {
	head    []byte
	tail    []byte
	start   int
	dropped int64
}

func (b *refBuf) len() int { return len(b.head) + len(b.tail) - b.start }

func (b *refBuf) write(p []byte) {
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

func refRender(head, tail []byte, dropped int64, limit int) rendered {
	var r rendered
	var bad, nuls int
	clean := func(p []byte) string {
		if utf8.Valid(p) && bytes.IndexByte(p, 0) < 0 {
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
	if dropped == 0 {
		// One text: a character that the head's end cuts is whole.
		head, tail = append(head[:len(head):len(head)], tail...), nil
	} else {
		// A character that the drop cuts is dropped whole.
		k, lead := cutRune(head), contBytes(tail[:min(len(tail), 3)])
		head, tail, dropped = head[:len(head)-k], tail[lead:], dropped+int64(k+lead)
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
	r.leaveOut(first, last, hn+tn-fn-utf8.RuneCountInString(last)+int(dropped))
	return r
}
