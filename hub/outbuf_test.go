package hub

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

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
			b.write([]byte(tt.in))
			r := b.take()
			assert.Equal(t, tt.want, r.text)
			assert.Equal(t, tt.truncated, r.truncatedChars)
			assert.Equal(t, tt.truncated > 0, r.truncated)
			assert.Equal(t, tt.notes, r.notes)
			assert.True(t, utf8.ValidString(r.text))
			assert.Equal(t, 0, b.len(), "take empties the buffer")
		})
	}
}

func TestOutBufKeepsHeadAndDropsTheMiddle(t *testing.T) {
	var b outBuf
	b.write(bytes.Repeat([]byte("h"), headKeep))
	for i := 0; i < 30; i++ {
		b.write(bytes.Repeat([]byte{'0' + byte(i%10)}, 100_000))
	}
	assert.LessOrEqual(t, b.len(), UnreadCap)
	assert.EqualValues(t, headKeep+3_000_000-UnreadCap, b.dropped)
	assert.LessOrEqual(t, cap(b.tail), 3*UnreadCap, "the tail is compacted")
	r := b.take()
	assert.True(t, strings.HasPrefix(r.text, strings.Repeat("h", headKeep)))
	assert.True(t, strings.HasSuffix(r.text, strings.Repeat("9", ReplyCap/2)))
	assert.Equal(t, headKeep+3_000_000-ReplyCap, r.truncatedChars)
	assert.Contains(t, r.notes[0], "characters of unread output were dropped")
}

func TestRenderUnderACallersCap(t *testing.T) {
	in := strings.Repeat("a", 500) + strings.Repeat("z", 500)
	for _, limit := range []int{1, 10, 999, 1000, ReplyCap} {
		var b outBuf
		b.write([]byte(in))
		r := b.takeCap(limit)
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
	b.write(bytes.Repeat([]byte("h"), headKeep))
	for i := 0; i < 25; i++ {
		b.write(bytes.Repeat([]byte{'0' + byte(i%10)}, 100_000))
	}
	r := b.takeCap(MaxReplyCap)
	assert.True(t, r.truncated)
	assert.EqualValues(t, headKeep+2_500_000-UnreadCap, r.truncatedChars, "only what was dropped is left out")
	assert.Equal(t, UnreadCap+len("\n[... 515000 characters left out ...]\n"), len(r.text))
	assert.Equal(t, ReplyCap, capOf(0))
	assert.Equal(t, MaxReplyCap, capOf(MaxReplyCap+1))
}
