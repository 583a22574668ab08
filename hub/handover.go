package hub

import (
	"fmt"
	"strings"
	"unicode/utf8"
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
	ho.Unread, ho.UnreadRuns = validRuns(ho.Unread, ho.UnreadRuns)
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
		// Lengths read from a file: compared, not summed, so that none
		// overflows.
		if n == 0 || abs(n) < 0 || abs(n) > len(all)-sum {
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

// validRuns is s made valid UTF-8 as JSON, which carries the hand-over,
// makes it (each byte that is not UTF-8 becomes U+FFFD), and runs, the
// lengths of s's runs, measured in it: otherwise the next hub finds runs
// that do not fit, and has both streams as one.
func validRuns(s string, runs []int) (string, []int) {
	if utf8.ValidString(s) {
		return s, runs
	}
	var sb strings.Builder
	out := make([]int, len(runs))
	r, left := 0, 0 // the run of byte i, and its bytes after i
	if len(runs) > 0 {
		left = abs(runs[0])
	}
	add := func(n int) { // byte i, n bytes long in s made valid
		for left == 0 && r+1 < len(runs) {
			r++
			left = abs(runs[r])
		}
		if r < len(runs) {
			out[r] += n
		}
		left--
	}
	for i := 0; i < len(s); {
		c, w := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && w == 1 {
			sb.WriteRune(utf8.RuneError)
			add(utf8.RuneLen(utf8.RuneError))
		} else {
			sb.WriteString(s[i : i+w])
			for range w {
				add(1)
			}
		}
		i += w
	}
	for i, n := range runs {
		if n < 0 {
			out[i] = -out[i]
		}
	}
	return sb.String(), out
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
