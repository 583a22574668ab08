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

func TestFencePrefixAtEnd(t *testing.T) {
	fence := []byte("<<FENCE>>")
	assert.Equal(t, 0, fencePrefixAtEnd([]byte("abc"), fence))
	assert.Equal(t, 2, fencePrefixAtEnd([]byte("abc<<"), fence))
	assert.Equal(t, 8, fencePrefixAtEnd([]byte("<<FENCE>"), fence))
	assert.Equal(t, 1, fencePrefixAtEnd([]byte("<"), fence))
}

// The fence is found whatever the chunking of the output stream.
func TestFenceAcrossChunks(t *testing.T) {
	fence := newFence()
	stream := append(append([]byte("before "), fence...), []byte(" after")...)
	for size := 1; size <= len(stream); size++ {
		s := &Session{}
		r := &run{cell: 1, fence: fence, finished: make(chan struct{})}
		s.cur = r
		for i := 0; i < len(stream); i += size {
			s.takeOutputLocked(stream[i:min(i+size, len(stream))])
		}
		if assert.NotNil(t, r.sealed, "chunk size %d", size) {
			assert.Equal(t, "before ", r.sealed.text, "chunk size %d", size)
		}
		s.takeOutputLocked(nil)
		assert.Equal(t, " after", s.out.take().text+string(s.pending), "chunk size %d", size)
	}
}
