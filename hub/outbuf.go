package hub

import "math/bits"

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
	// window is how much of the rest is kept: its last bytes.
	window = UnreadCap - headKeep
)

// outBuf holds a session's unread output once, merged in the order it
// was written, with each byte's stream marked: its first headKeep bytes,
// and its last window bytes in a ring. Bytes between the two are dropped
// and counted. It grows with what it holds up to UnreadCap, and never
// beyond: a flood wraps around the ring, and costs nothing more.
//
// Each stream is cut from it on take: its own first headKeep bytes (kept
// apart where the merged head has no room for them) and its bytes in the
// ring. A stream's bytes that the ring dropped are counted as dropped
// from that stream: its text may have a gap where the three buffers this
// replaced kept each stream's last UnreadCap bytes whole, at three times
// the cost.
//
// The zero value is empty. Not safe for concurrent use; the session's
// mutex guards it.
type outBuf struct {
	// buf holds the head in buf[:hl] and the ring in buf[headKeep:], its
	// bytes from ws on, wl of them, wrapping at len(buf).
	buf        []byte
	hl, ws, wl int
	dropped    int64
	// The marks: while mixed is unset every byte is of stream only;
	// after, bit i of bits is set when buf[i] is stdout.
	mixed bool
	only  int
	bits  []uint64
	// Per stream (stdoutIx, stderrIx): bytes written, bytes in the ring,
	// and its head bytes that went to the ring, not the merged head.
	total [2]int
	inWin [2]int
	extra [2][]byte
}

const (
	stdoutIx = 0
	stderrIx = 1
)

func streamIx(stdout bool) int {
	if stdout {
		return stdoutIx
	}
	return stderrIx
}

// len is how many bytes it holds, merged.
func (b *outBuf) len() int { return b.hl + b.wl }

// size is the memory it holds.
func (b *outBuf) size() int {
	return cap(b.buf) + 8*cap(b.bits) + cap(b.extra[0]) + cap(b.extra[1])
}

func (b *outBuf) write(stdout bool, p []byte) {
	if len(p) == 0 {
		return
	}
	st := streamIx(stdout)
	switch {
	case b.len() == 0 && !b.mixed:
		b.only = st
	case !b.mixed && b.only != st:
		b.mixed = true
		b.bits = make([]uint64, (len(b.buf)+63)/64)
		b.setMarks(0, len(b.buf), b.only == stdoutIx)
	}
	n := min(headKeep-b.hl, len(p))
	if off := b.total[st] + n; off < headKeep {
		m := min(len(p)-n, headKeep-off)
		b.extra[st] = append(b.extra[st], p[n:n+m]...)
	}
	b.total[st] += len(p)
	if n > 0 {
		b.grow(b.hl + n)
		copy(b.buf[b.hl:], p[:n])
		b.mark(b.hl, b.hl+n, st)
		b.hl += n
	}
	if q := p[n:]; len(q) > 0 {
		b.writeRing(q, st)
	}
}

// writeRing adds q to the ring, dropping its oldest bytes to make room.
func (b *outBuf) writeRing(q []byte, st int) {
	if over := len(q) - window; over > 0 {
		b.drop(b.wl)
		b.dropped += int64(over)
		q = q[over:]
	}
	b.grow(headKeep + b.wl + len(q))
	size := len(b.buf) - headKeep
	if over := b.wl + len(q) - size; over > 0 {
		b.drop(over)
	}
	at := (b.ws + b.wl) % size
	k := copy(b.buf[headKeep+at:], q)
	b.mark(headKeep+at, headKeep+at+k, st)
	copy(b.buf[headKeep:], q[k:])
	b.mark(headKeep, headKeep+len(q)-k, st)
	b.wl += len(q)
	b.inWin[st] += len(q)
}

// drop drops the ring's oldest n bytes.
func (b *outBuf) drop(n int) {
	if n == 0 {
		return
	}
	out := n
	if b.mixed {
		out = 0
		b.ringRanges(b.ws, n, func(lo, hi int) { out += b.countStdout(lo, hi) })
		b.inWin[stdoutIx] -= out
		b.inWin[stderrIx] -= n - out
	} else {
		b.inWin[b.only] -= n
	}
	size := len(b.buf) - headKeep
	b.ws = (b.ws + n) % size
	b.wl -= n
	b.dropped += int64(n)
	if b.wl == 0 {
		b.ws = 0
	}
}

// grow makes buf at least need bytes long, doubling, up to UnreadCap. The
// ring wraps only once buf is that long, so what it holds is in order.
func (b *outBuf) grow(need int) {
	if need <= len(b.buf) || len(b.buf) == UnreadCap {
		return
	}
	n := min(UnreadCap, max(need, 2*len(b.buf), 64))
	nb := make([]byte, n)
	copy(nb, b.buf)
	b.buf = nb
	if b.mixed {
		nbits := make([]uint64, (n+63)/64)
		copy(nbits, b.bits)
		b.bits = nbits
	}
}

// ringRanges calls fn with the ranges of buf that hold the n ring bytes
// from ring position at, in order.
func (b *outBuf) ringRanges(at, n int, fn func(lo, hi int)) {
	size := len(b.buf) - headKeep
	if n == 0 {
		return
	}
	k := min(n, size-at)
	fn(headKeep+at, headKeep+at+k)
	if k < n {
		fn(headKeep, headKeep+n-k)
	}
}

// mark marks buf[lo:hi] as of stream st.
func (b *outBuf) mark(lo, hi, st int) {
	if b.mixed {
		b.setMarks(lo, hi, st == stdoutIx)
	}
}

func (b *outBuf) setMarks(lo, hi int, stdout bool) {
	for i := lo; i < hi; {
		w, k := i/64, i%64
		n := min(64-k, hi-i)
		m := (^uint64(0) >> (64 - n)) << k
		if stdout {
			b.bits[w] |= m
		} else {
			b.bits[w] &^= m
		}
		i += n
	}
}

func (b *outBuf) countStdout(lo, hi int) int {
	c := 0
	for i := lo; i < hi; {
		w, k := i/64, i%64
		n := min(64-k, hi-i)
		m := (^uint64(0) >> (64 - n)) << k
		c += bits.OnesCount64(b.bits[w] & m)
		i += n
	}
	return c
}

// runs calls fn with the runs of stream st in buf[lo:hi], in order.
func (b *outBuf) runs(lo, hi, st int, fn func(p []byte)) {
	if !b.mixed {
		if b.only == st && lo < hi {
			fn(b.buf[lo:hi])
		}
		return
	}
	for i := lo; i < hi; {
		out := b.bits[i/64]>>(i%64)&1 == 1
		j := b.runEnd(i, hi, out)
		if out == (st == stdoutIx) {
			fn(b.buf[i:j])
		}
		i = j
	}
}

// runEnd is where the run of one stream that starts at i ends, by hi.
func (b *outBuf) runEnd(i, hi int, stdout bool) int {
	for i < hi {
		x := b.bits[i/64]
		if stdout {
			x = ^x
		}
		x &= ^uint64(0) << (i % 64)
		if x != 0 {
			return min(hi, i/64*64+bits.TrailingZeros64(x))
		}
		i = i/64*64 + 64
	}
	return hi
}

// ring is the ring's bytes, in order.
func (b *outBuf) ring() pieces { return pieces{b: b, st: -1} }

// each calls fn with the runs of one stream, merged head first, in the
// order they were written.
func (b *outBuf) each(fn func(stdout bool, p []byte)) {
	visit := func(lo, hi int) {
		for i := lo; i < hi; {
			out := b.only == stdoutIx
			j := hi
			if b.mixed {
				out = b.bits[i/64]>>(i%64)&1 == 1
				j = b.runEnd(i, hi, out)
			}
			fn(out, b.buf[i:j])
			i = j
		}
	}
	visit(0, b.hl)
	b.ringRanges(b.ws, b.wl, visit)
}

// stream is stream st cut from the merged output: its head, its bytes in
// the ring after that head, and how many of its bytes are left out.
func (b *outBuf) stream(st int) (head []byte, tail pieces, dropped int64) {
	if !b.mixed {
		if b.only == st {
			head = b.buf[:b.hl]
		}
	} else {
		b.runs(0, b.hl, st, func(p []byte) { head = append(head, p...) })
	}
	head = append(head[:len(head):len(head)], b.extra[st]...)
	skip := min(b.inWin[st], max(0, len(head)-(b.total[st]-b.inWin[st])))
	tail = pieces{b: b, st: st, skip: skip}
	dropped = int64(b.total[st] - len(head) - (b.inWin[st] - skip))
	return head, tail, dropped
}

// renderAll renders the merged output under a cap of limit characters.
func (b *outBuf) renderAll(limit int) rendered {
	return render(b.buf[:b.hl], b.ring(), b.dropped, limit)
}

// render renders the merged output and each stream under a cap of limit
// characters.
func (b *outBuf) render(limit int) output {
	one := func(st int) rendered {
		h, t, d := b.stream(st)
		return render(h, t, d, limit)
	}
	return output{all: b.renderAll(limit), stdout: one(stdoutIx), stderr: one(stderrIx)}
}

// capOf is the output cap of a request's max_output: ReplyCap when unset.
func capOf(maxOutput int) int {
	if maxOutput <= 0 {
		return ReplyCap
	}
	return min(maxOutput, MaxReplyCap)
}
