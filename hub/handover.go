package hub

import (
	"fmt"
	"strings"
)

// keepOutput puts the unread output b held in the hand-over: merged, with
// its runs, and each stream apart.
func (ho *handover) keepOutput(b *outBuf) {
	var all, stdout, stderr strings.Builder
	b.each(func(out bool, p []byte) {
		all.Write(p)
		if out {
			stdout.Write(p)
			ho.UnreadRuns = append(ho.UnreadRuns, len(p))
		} else {
			stderr.Write(p)
			ho.UnreadRuns = append(ho.UnreadRuns, -len(p))
		}
	})
	ho.Unread, ho.UnreadStdout, ho.UnreadStderr = all.String(), stdout.String(), stderr.String()
	if b.dropped > 0 {
		ho.Notes = append(ho.Notes, fmt.Sprintf("%d bytes of unread output were dropped before the restart", b.dropped))
	}
}

// restoreOutput writes the hand-over's unread output to b, run by run. A
// hand-over without runs that fit (from a hub before them) has its merged
// output taken as the one stream that has any, or as stderr.
func (ho *handover) restoreOutput(b *outBuf) {
	all := []byte(ho.Unread)
	sum := 0
	for _, n := range ho.UnreadRuns {
		if n == 0 || abs(n) < 0 || sum+abs(n) > len(all) {
			sum = -1
			break
		}
		sum += abs(n)
	}
	if sum != len(all) || len(ho.UnreadRuns) == 0 {
		b.write(ho.UnreadStderr == "" && ho.UnreadStdout != "", all)
		return
	}
	for _, n := range ho.UnreadRuns {
		b.write(n > 0, all[:abs(n)])
		all = all[abs(n):]
	}
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
