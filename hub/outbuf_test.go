package hub

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// takeAll empties b and renders its merged output under limit.
func takeAll(b *outBuf, limit int) rendered {
	r := b.renderAll(limit)
	*b = outBuf{}
	return r
}

func TestRender(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		want      string
		truncated int
		notes     []string
	}{
		{"plain", "hello\n", "hello\n", 0, nil},
		{"invalid utf-8", "a\xffb", "a\ufffdb", 0, []string{"output had 1 bytes that are not UTF-8, shown as �"}},
		{"nul", "a\x00b", "a␀b", 0, []string{"output had 1 NUL bytes, shown as ␀"}},
		{"multibyte at the cap", strings.Repeat("é", ReplyCap+10), strings.Repeat("é", ReplyCap/2) + "\n[... 10 characters left out ...]\n" + strings.Repeat("é", ReplyCap/2), 10, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b outBuf
			b.write(true, []byte(tt.in))
			r := takeAll(&b, ReplyCap)
			assert.Equal(t, tt.want, r.text)
			assert.Equal(t, tt.truncated, r.truncatedChars)
			assert.Equal(t, tt.truncated > 0, r.truncated)
			assert.Equal(t, tt.notes, r.notes)
			assert.True(t, utf8.ValidString(r.text))
		})
	}
}

func TestOutBufKeepsHeadAndDropsTheMiddle(t *testing.T) {
	var b outBuf
	b.write(false, bytes.Repeat([]byte("h"), headKeep))
	for i := 0; i < 30; i++ {
		b.write(false, bytes.Repeat([]byte{'0' + byte(i%10)}, 100_000))
	}
	assert.Equal(t, UnreadCap, b.len())
	assert.EqualValues(t, headKeep+3_000_000-UnreadCap, b.dropped)
	assert.Equal(t, UnreadCap, b.size(), "one stream's flood is kept once, in no more than it holds")
	out := b.render(ReplyCap)
	for _, r := range []rendered{out.all, out.stderr} {
		assert.True(t, strings.HasPrefix(r.text, strings.Repeat("h", headKeep)))
		assert.True(t, strings.HasSuffix(r.text, strings.Repeat("9", ReplyCap/2)))
		assert.Equal(t, headKeep+3_000_000-ReplyCap, r.truncatedChars)
		assert.Contains(t, r.notes[0], "characters of unread output were dropped")
	}
	assert.Equal(t, rendered{}, out.stdout)
}

func TestRenderUnderACallersCap(t *testing.T) {
	in := strings.Repeat("a", 500) + strings.Repeat("z", 500)
	for _, limit := range []int{1, 10, 999, 1000, ReplyCap} {
		var b outBuf
		b.write(true, []byte(in))
		r := takeAll(&b, limit)
		if limit >= 1000 {
			assert.Equal(t, in, r.text, "limit %d", limit)
			assert.False(t, r.truncated)
			continue
		}
		assert.True(t, r.truncated, "limit %d", limit)
		assert.Equal(t, 1000-limit, r.truncatedChars, "limit %d", limit)
		first, last, ok := strings.Cut(r.text, "[... ")
		assert.True(t, ok)
		assert.Equal(t, strings.Repeat("a", limit/2)+"\n", first, "the head keeps half")
		_, last, _ = strings.Cut(last, "...]\n")
		assert.Equal(t, strings.Repeat("z", limit-limit/2), last, "the tail keeps the rest")
	}
	// After a drop, a cap above the default shows the whole tail.
	var b outBuf
	b.write(true, bytes.Repeat([]byte("h"), headKeep))
	for i := 0; i < 25; i++ {
		b.write(true, bytes.Repeat([]byte{'0' + byte(i%10)}, 100_000))
	}
	r := takeAll(&b, MaxReplyCap)
	assert.True(t, r.truncated)
	assert.EqualValues(t, headKeep+2_500_000-UnreadCap, r.truncatedChars, "only what was dropped is left out")
	assert.Equal(t, UnreadCap+len("\n[... 515000 characters left out ...]\n"), len(r.text))
	assert.Equal(t, ReplyCap, capOf(0))
	assert.Equal(t, MaxReplyCap, capOf(MaxReplyCap+1))
}

// A flood of 100 MB, of one stream or of both in turn, keeps the buffer
// within UnreadCap (and, for both, a bit a byte to tell them apart and
// each stream's head); the next take lets all of it go.
func TestFloodKeepsUnreadCap(t *testing.T) {
	line := append(bytes.Repeat([]byte("x"), 99), '\n')
	block := bytes.Repeat(line, 640) // 64000 bytes
	for _, both := range []bool{false, true} {
		var o outputs
		peak, n := 0, 100_000_000/len(block)
		for i := 0; i < n; i++ {
			o.write(!both || i%2 == 0, block)
			peak = max(peak, o.buf.size())
		}
		bound := UnreadCap
		if both {
			bound += UnreadCap/8 + 64 + 2*headKeep
		}
		assert.LessOrEqual(t, peak, bound, "both streams: %v", both)
		assert.Equal(t, UnreadCap, o.len())
		out := o.take()
		assert.Equal(t, n*len(block)-ReplyCap, out.all.truncatedChars)
		assert.True(t, strings.HasSuffix(out.all.text, "\n"+strings.Repeat(string(line), 149)))
		assert.True(t, out.stdout.truncated)
		assert.Zero(t, o.buf.size(), "a take lets it go")
	}
}

// refOutputs is the three-buffer model, and a log of what was written
// since the last take, for the part of each stream that outBuf keeps.
type refOutputs struct {
	all, stdout, stderr refBuf
	log                 []refWrite
}

type refWrite struct {
	stdout bool
	n      int
}

func (o *refOutputs) write(stdout bool, p []byte) {
	if len(p) == 0 {
		return
	}
	o.all.write(p)
	if stdout {
		o.stdout.write(p)
	} else {
		o.stderr.write(p)
	}
	o.log = append(o.log, refWrite{stdout, len(p)})
}

// render renders the model: merged as it always was; each stream keeps
// its head, and of its tail what the merged tail holds of it too.
func (o *refOutputs) render(limit int) output {
	inTail := func(stdout bool) int {
		n, left := 0, len(o.all.tail)-o.all.start
		for i := len(o.log) - 1; i >= 0 && left > 0; i-- {
			k := min(left, o.log[i].n)
			if o.log[i].stdout == stdout {
				n += k
			}
			left -= k
		}
		return n
	}
	one := func(b *refBuf, stdout bool) rendered {
		tail := b.tail[b.start:]
		keep := min(len(tail), inTail(stdout))
		return refRender(b.head, tail[len(tail)-keep:], b.dropped+int64(len(tail)-keep), limit)
	}
	return output{
		all:    refRender(o.all.head, o.all.tail[o.all.start:], o.all.dropped, limit),
		stdout: one(&o.stdout, true), stderr: one(&o.stderr, false),
	}
}

// FuzzOutBuf: any writes of both streams, peeks and takes under any cap
// give what the three-buffer model gives: merged, exactly; each stream,
// exactly as long as the merged output dropped nothing, and after a
// drop, its head and the part of its tail that the merged tail holds.
// The buffer stays within its bounds throughout.
func FuzzOutBuf(f *testing.F) {
	f.Add([]byte("\x43ab\x05hello\x80\x41\xff\x91\x42\xc3\xa9"))
	f.Add([]byte("\x3f\x07\x7f\x00\x33é\x80\x82\x81\x3fz\x84"))
	f.Add([]byte("\x23\x01\x63\xe2\x82\x24\xac\x81\x3e\x00\x7e\x01\x86"))
	f.Add([]byte("\x1f\x00\x5f\x01\x1f\x02\x5f\x03\x87\x2a\x01\x6a\x02\x85"))
	// Each stream past its head, then a character cut in runs of one byte.
	f.Add([]byte("\x1ce\x1ce\x1ce\x1ce\x5co\x5co\x5co\x5co\x40\xe2\x00-\x40\x82\x00-\x40\xac\x85"))
	caps := []int{1, 2, 7, 100, 1000, ReplyCap, 40_000, MaxReplyCap}
	f.Fuzz(func(t *testing.T, script []byte) {
		var o outputs
		var ref refOutputs
		written := 0 // bounded, to keep an input quick: a few floods
		for i := 0; i < len(script) && written < 5*UnreadCap; {
			op := script[i]
			i++
			switch {
			case op&0x80 != 0 && op&0x40 != 0:
				require.Equal(t, ref.render(ReplyCap).all, o.peek(), "peek")
			case op&0x80 != 0:
				limit := caps[int(op)%len(caps)]
				want, got := ref.render(limit), o.takeCap(limit)
				require.Equal(t, want.all, got.all, "merged, limit %d", limit)
				require.Equal(t, want.stdout, got.stdout, "stdout, limit %d", limit)
				require.Equal(t, want.stderr, got.stderr, "stderr, limit %d", limit)
				ref = refOutputs{}
			default:
				// A write: a pattern of the next k bytes, repeated to a
				// size of a class that op's bits 2-5 choose.
				k := 1 + int(op&0x03)
				pat := script[i:min(i+k, len(script))]
				i += len(pat)
				if len(pat) == 0 {
					break
				}
				n := int(op>>2&0x03) + 1
				switch op >> 4 & 0x03 {
				case 1:
					n *= 1000
				case 2:
					n *= 400_000
				case 3:
					n = window + n*headKeep/2 - headKeep
				}
				p := bytes.Repeat(pat, n/len(pat)+1)[:n]
				if n > 1000 {
					// Plain text within, any bytes at its ends: where it
					// is cut, and fast to check.
					plain := make([]byte, len(pat))
					for j := range plain {
						plain[j] = 0x30 + pat[j]&0x3f
					}
					copy(p[8:n-8], bytes.Repeat(plain, n/len(plain)+1))
				}
				stdout := op&0x40 != 0
				written += n
				o.write(stdout, p)
				ref.write(stdout, p)
				require.Equal(t, ref.all.len(), o.len())
				require.LessOrEqual(t, o.buf.size(), UnreadCap+UnreadCap/8+64+2*headKeep)
			}
		}
	})
}

// A hand-over keeps the unread output's runs, and the next hub has them
// as they were: merged and each stream apart. One from a hub before the
// runs has its merged output as the one stream that has any.
func TestHandoverKeepsRuns(t *testing.T) {
	var b outBuf
	for i, s := range []string{"out 1\n", "err 1\n", "out 2\n", "err é\n", "out 3"} {
		b.write(i%2 == 0, []byte(s))
	}
	want := b.render(ReplyCap)
	var ho handover
	ho.keepOutput(&b)
	assert.Equal(t, []int{6, -6, 6, -7, 5}, ho.UnreadRuns)
	assert.Equal(t, "out 1\nout 2\nout 3", ho.UnreadStdout)
	var back outBuf
	ho.restoreOutput(&back)
	assert.Equal(t, want, back.render(ReplyCap))

	old := handover{Unread: "a\nb\n", UnreadStdout: "a\nb\n"}
	back = outBuf{}
	old.restoreOutput(&back)
	assert.Equal(t, "a\nb\n", back.render(ReplyCap).stdout.text)
	for _, runs := range [][]int{{3}, {2, 3}, {0, 4}, {-1 << 62, 4}, {-(1 << 63), 4}} {
		bad := handover{Unread: "a\nb\n", UnreadRuns: runs, UnreadStdout: "a\n", UnreadStderr: "b\n"}
		back = outBuf{}
		bad.restoreOutput(&back)
		out := back.render(ReplyCap)
		assert.Equal(t, "a\nb\n", out.all.text, "runs %v", runs)
		assert.Equal(t, "a\nb\n", out.stderr.text, "runs %v", runs)
	}
}

// A stream's text in the ring comes in parts, one a run; a character
// cut between them is decoded whole, however the runs fall.
func TestScanAcrossParts(t *testing.T) {
	texts := []string{"a€b", "\xe2\x82\xac\xe2\x82", "\xf0\x9f\x98\x80x\x00\xff\xc3", "é\xe2\x82a\xf0\x9f\x98\x80\x80"}
	for _, text := range texts {
		for k := 1; k <= 5; k++ {
			var b outBuf
			b.write(false, bytes.Repeat([]byte("e"), headKeep))
			b.write(true, bytes.Repeat([]byte("o"), headKeep))
			for i := 0; i < len(text); i += k {
				b.write(true, []byte(text[i:min(i+k, len(text))]))
				b.write(false, []byte("-"))
			}
			_, tail, dropped := b.stream(stdoutIx)
			require.Zero(t, dropped)
			r, bad, nuls := scan(tail)
			wr, wbad, wnuls := scanBytes([]byte(text))
			assert.Equal(t, []int{wr, wbad, wnuls}, []int{r, bad, nuls}, "%q in parts of %d", text, k)
			assert.Equal(t, text, string(gather(tail, 0, len(text))))
		}
	}
}

// A character that the head's end cuts is one character when nothing
// was dropped between head and tail: merged and in each stream, whole or
// cut for the reply's cap.
func TestHeadCutsACharacter(t *testing.T) {
	text := "x" + strings.Repeat("é", 10_000) // the head ends in the middle of an é
	const at = headKeep - 99                  // where an é begins
	for _, limit := range []int{ReplyCap, 1000} {
		var b outBuf
		b.write(true, []byte(text[:at]))
		b.write(false, []byte("err\n"))
		b.write(true, []byte(text[at:]))
		out := b.render(limit)
		for _, r := range []rendered{out.all, out.stdout} {
			assert.Empty(t, r.notes, "limit %d", limit)
			assert.Equal(t, -1, strings.IndexRune(r.text, utf8.RuneError), "limit %d", limit)
		}
		if limit == ReplyCap {
			assert.True(t, out.stdout.text == text, "stdout whole")
			assert.True(t, out.all.text == text[:at]+"err\n"+text[at:], "merged whole")
		}
	}
}

// Where unread output was dropped, a character that the drop cuts at
// either end is dropped whole: shown as nothing, not as U+FFFD with a
// note of bytes that are not UTF-8.
func TestDropCutsACharacter(t *testing.T) {
	for _, text := range []string{
		"x" + strings.Repeat("é", 1_500_000),        // the head's end cuts an é
		"xx" + strings.Repeat("é", 1_500_000) + "z", // the ring's start does
	} {
		var b outBuf
		b.write(true, []byte(text))
		require.NotZero(t, b.dropped)
		out := b.render(ReplyCap)
		for _, r := range []rendered{out.all, out.stdout} {
			assert.Len(t, r.notes, 1)
			assert.Contains(t, r.notes[0], "were dropped")
			assert.Equal(t, -1, strings.IndexRune(r.text, utf8.RuneError))
			assert.True(t, strings.HasSuffix(text, r.text[strings.LastIndexByte(r.text, '\n')+1:]))
		}
	}
}
