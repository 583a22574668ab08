package hub

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/replhub/replhub/wire"
)

// A reply names four other sessions that run or have a result unread at
// most, and counts the rest: every reply carries the line.
func TestOthersLineIsShort(t *testing.T) {
	h := testHub(t, testPaths(t))
	for i := 0; i < 7; i++ {
		s := startedSession(h, fmt.Sprintf("w%d", i), 1)
		s.cur = &run{cell: 3, start: time.Now(), finished: make(chan struct{})}
		if i == 6 {
			close(s.cur.finished)
		}
		h.sessions[s.name] = s
	}
	self := startedSession(h, "me", 1)
	h.sessions["me"] = self
	got := h.othersLine(wire.Request{Name: "me", Surface: wire.SurfaceCLI})
	assert.Regexp(t, `^other sessions: w0 running cell 3 for \S+; w1 running cell 3 for \S+; w2 running cell 3 for \S+; w3 running cell 3 for \S+; 3 more running or unread: `+"`replhub sessions`"+` shows them$`, got)
	h.sessions = map[string]*Session{"me": self, "w6": h.sessions["w6"]}
	assert.Equal(t, "other sessions: w6 has an unread result (`replhub wait w6`)", h.othersLine(wire.Request{Name: "me", Surface: wire.SurfaceCLI}))
}
