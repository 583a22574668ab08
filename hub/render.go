package hub

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"
)

// rendered is output made ready for a reply.
type rendered struct {
	text           string
	truncated      bool
	truncatedChars int
	notes          []string
}

// pieces is a run of bytes held in parts: one slice, the unread output's
// ring, or one stream's runs in it, each after pre. Rendering reads them
// where they lie and copies only what a reply shows.
type pieces struct {
	pre []byte // the bytes before the rest
	one []byte // when b is nil
	b   *outBuf
	// st is the stream whose runs in b's ring these are, or -1 for all
	// of it; skip how many of the first bytes after pre to pass over.
	st, skip int
}

// whole is p as pieces.
func whole(p []byte) pieces { return pieces{one: p} }

// each calls fn with each part in order.
func (p pieces) each(fn func(part []byte)) {
	if len(p.pre) > 0 {
		fn(p.pre)
	}
	left := p.skip
	part := func(q []byte) {
		k := min(left, len(q))
		left -= k
		if k < len(q) {
			fn(q[k:])
		}
	}
	if p.b == nil {
		part(p.one)
		return
	}
	b := p.b
	b.ringRanges(b.ws, b.wl, func(lo, hi int) {
		if p.st < 0 {
			part(b.buf[lo:hi])
			return
		}
		b.runs(lo, hi, p.st, part)
	})
}

// render turns raw output, a head and a tail, into reply text: invalid
// UTF-8 becomes U+FFFD, NUL bytes become ␀, and more than limit
// characters keep head and tail with a line saying how much was left out
// (dropped counts what was left out between them). Head and tail are
// decoded each on its own after a drop, else as one text; a character
// that a drop cuts is dropped whole.
func render(head []byte, tail pieces, dropped int64, limit int) rendered {
	var r rendered
	if dropped == 0 && len(head) > 0 {
		// Nothing was left out between them: head and tail are one
		// text, in which a character that the head's end cuts is whole.
		tail.pre, head = head, nil
	} else if dropped > 0 {
		// The drop may cut a character at either end: its pieces go
		// with it, not shown as bytes that are not UTF-8.
		k, lead := cutRune(head), contBytes(gather(tail, 0, utf8.UTFMax-1))
		head, tail.skip, dropped = head[:len(head)-k], tail.skip+lead, dropped+int64(k+lead)
	}
	hn, hbad, hnul := scan(whole(head))
	tn, tbad, tnul := scan(tail)
	if bad := hbad + tbad; bad > 0 {
		r.notes = append(r.notes, fmt.Sprintf("output had %d bytes that are not UTF-8, shown as �", bad))
	}
	if nuls := hnul + tnul; nuls > 0 {
		r.notes = append(r.notes, fmt.Sprintf("output had %d NUL bytes, shown as ␀", nuls))
	}
	if dropped > 0 {
		r.notes = append(r.notes, fmt.Sprintf("%d characters of unread output were dropped (a session keeps at most %d)", dropped, UnreadCap))
	}
	size := 0
	tail.each(func(p []byte) { size += len(p) })
	if dropped == 0 && tn <= limit {
		r.text = clean(gather(tail, 0, size))
		return r
	}
	// Keep half the cap from each end; after a drop the head holds at
	// most headKeep, and the tail gets the rest of the cap. Without one,
	// the tail is the whole text, and its first half is the tail's too.
	var first string
	from := 0 // where in the tail the first half ends
	if dropped == 0 {
		k := limit / 2
		b := gather(tail, 0, min(size, runeBytes(k)))
		for n := 0; n < k && from < len(b); n++ {
			_, w := utf8.DecodeRune(b[from:])
			from += w
		}
		first = clean(b[:from])
	} else {
		first = prefixRunes(clean(head), limit/2)
	}
	fn := utf8.RuneCountInString(first)
	m := limit - fn
	last := suffixRunes(clean(gather(tail, max(from, size-runeBytes(m)), size)), m)
	r.leaveOut(first, last, hn+tn-fn-utf8.RuneCountInString(last)+int(dropped))
	return r
}

// leaveOut makes r's text first and last with a line between that says
// that left characters were left out.
func (r *rendered) leaveOut(first, last string, left int) {
	r.truncated = true
	r.truncatedChars = left
	nl := ""
	if !strings.HasSuffix(first, "\n") {
		nl = "\n"
	}
	r.text = fmt.Sprintf("%s%s[... %d characters left out ...]\n%s", first, nl, left, last)
}

// contBytes is how many bytes at the start of p continue a character.
func contBytes(p []byte) int {
	n := 0
	for n < len(p) && p[n]&0xc0 == 0x80 {
		n++
	}
	return n
}

// runeBytes bounds the bytes that n characters take, with room for the
// decoding of a cut's neighbourhood.
func runeBytes(n int) int { return n*utf8.UTFMax + utf8.UTFMax }

// gather copies bytes [from, to) of p into one slice.
func gather(p pieces, from, to int) []byte {
	if to <= from {
		return nil
	}
	var out []byte
	off := 0
	p.each(func(b []byte) {
		lo, hi := max(from-off, 0), min(to-off, len(b))
		switch {
		case lo >= hi:
		case out == nil && hi-lo == to-from:
			out = b[lo:hi] // all in one part: read where it lies
		default:
			if out == nil {
				out = make([]byte, 0, to-from)
			}
			out = append(out, b[lo:hi]...)
		}
		off += len(b)
	})
	return out
}

// scan counts the characters of p decoded as one text: each byte that is
// not UTF-8 counts as one, as it is shown as one U+FFFD; and of them, the
// bytes that are not UTF-8 and the NULs. A character cut between two
// parts is decoded whole, byte by byte.
func scan(p pieces) (runes, bad, nuls int) {
	var carry [utf8.UTFMax]byte // a cut character's first bytes
	nc := 0
	one := func(c rune, w int) {
		runes++
		switch {
		case c == utf8.RuneError && w == 1:
			bad++
		case c == 0:
			nuls++
		}
	}
	p.each(func(b []byte) {
		for nc > 0 && len(b) > 0 {
			carry[nc], nc, b = b[0], nc+1, b[1:]
			for nc > 0 && utf8.FullRune(carry[:nc]) {
				c, w := utf8.DecodeRune(carry[:nc])
				one(c, w)
				nc = copy(carry[:], carry[w:nc])
			}
		}
		if nc > 0 {
			return // b went to the cut character, which goes on
		}
		k := cutRune(b)
		r, bd, z := scanBytes(b[:len(b)-k])
		runes, bad, nuls = runes+r, bad+bd, nuls+z
		nc = copy(carry[:], b[len(b)-k:])
	})
	r, bd, z := scanBytes(carry[:nc])
	return runes + r, bad + bd, nuls + z
}

// scanBytes is scan of one part.
func scanBytes(b []byte) (runes, bad, nuls int) {
	runes = utf8.RuneCount(b)
	nuls = bytes.Count(b, []byte{0})
	if !utf8.Valid(b) {
		for len(b) > 0 {
			c, w := utf8.DecodeRune(b)
			if c == utf8.RuneError && w <= 1 {
				bad++
			}
			b = b[w:]
		}
	}
	return runes, bad, nuls
}

// clean is p as valid UTF-8: bytes that are not UTF-8 become U+FFFD, NULs ␀.
func clean(p []byte) string {
	if utf8.Valid(p) && bytes.IndexByte(p, 0) < 0 {
		return string(p)
	}
	var sb strings.Builder
	sb.Grow(len(p))
	for len(p) > 0 {
		c, n := utf8.DecodeRune(p)
		switch {
		case c == utf8.RuneError && n <= 1:
			sb.WriteRune(utf8.RuneError)
		case c == 0:
			sb.WriteRune('␀')
		default:
			sb.Write(p[:n])
		}
		p = p[n:]
	}
	return sb.String()
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
