package hub

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The hand-over travels as JSON, which makes each byte that is not UTF-8
// a U+FFFD: the runs still fit the merged output the next hub reads, so
// each stream comes back apart, and in order.
func TestHandoverKeepsRunsThroughJSON(t *testing.T) {
	var b outBuf
	for i, s := range []string{"out \xff1\n", "err \xfe\xfd\n", "out \xe2\x82", "\xacerr\n", "out é\x80"} {
		b.write(i%2 == 0, []byte(s))
	}
	want := b.render(ReplyCap)
	_, nb := throughHandover(t, &b)
	out := nb.render(ReplyCap)
	assert.Equal(t, "out �1\nerr ��\nout €err\nout é�", out.all.text)
	assert.Equal(t, "out �1\nout ��out é�", out.stdout.text)
	assert.Equal(t, "err ��\n�err\n", out.stderr.text)
	for _, r := range [][2]rendered{{want.all, out.all}, {want.stdout, out.stdout}, {want.stderr, out.stderr}} {
		assert.Equal(t, r[0].text, r[1].text)
	}
}

// throughHandover keeps b's output in a hand-over, as a record carries it
// (JSON), and restores it into a new buffer.
func throughHandover(t testing.TB, b *outBuf) (handover, *outBuf) {
	t.Helper()
	var ho handover
	ho.keepOutput(b)
	j, err := json.Marshal(&ho)
	require.NoError(t, err)
	var back handover
	require.NoError(t, json.Unmarshal(j, &back))
	var nb outBuf
	back.restoreOutput(&nb)
	return back, &nb
}
