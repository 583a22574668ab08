// Package nodeset reads and writes host lists in the node-set syntax of
// ClusterShell: "lab-[1-3,7]" is lab-1, lab-2, lab-3 and lab-7,
// "node[01-10]" keeps the zero padding, "rack[1-2]-n[1-4]" is the product
// of both ranges, "a-[1-9/2]" steps by two, and items are joined by commas
// ("lab-[1-40],gw-2"). An item "@name" is a named group, which the caller
// resolves (config.json's "groups").
//
// Expand turns an expression into hosts, never more than a bound it is
// given, so that "n[1-999999999]" is refused before anything is
// allocated for it. Fold does the reverse: hosts into the shortest
// expression on one numeric field, the one a reader scans (lab-[1-3,7]).
//
// It knows nothing of ssh, sessions or config files.
package nodeset

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Error is an expression Expand cannot read.
type Error struct {
	Expr   string
	Reason string
}

func (e *Error) Error() string {
	return fmt.Sprintf("nodeset: %q: %s", cut(e.Expr, 80), e.Reason)
}

func cut(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// Groups resolves a group name (without its @) to its members, each a
// node-set expression of its own; ok is false for a group nobody defined.
type Groups func(name string) (members []string, ok bool)

// maxDepth bounds groups that name groups: a cycle ends here.
const maxDepth = 8

// maxDigits bounds one number in a range; more digits would overflow.
const maxDigits = 9

// Expand returns the hosts of expr in order of first appearance, each
// once. More than max hosts (or max items, counting duplicates) is an
// error; groups may be nil when no group may be named.
func Expand(expr string, max int, groups Groups) ([]string, error) {
	x := &expander{max: max, groups: groups, seen: map[string]bool{}}
	if err := x.expr(expr, 0); err != nil {
		return nil, err
	}
	if len(x.out) == 0 {
		return nil, &Error{expr, "names no host"}
	}
	return x.out, nil
}

type expander struct {
	max    int
	groups Groups
	seen   map[string]bool
	out    []string
	items  int
	refs   int // groups named so far, each time
}

// maxRefs bounds how many times groups are named in one expression, their
// members' included: groups that name groups many times over, down to
// ones with no host, would otherwise take a time that grows as a power of
// the depth (40 names a level, 8 levels: 40^8), and count no host.
const maxRefs = 10000

func (x *expander) expr(expr string, depth int) error {
	items, err := split(expr)
	if err != nil {
		return &Error{expr, err.Error()}
	}
	for _, it := range items {
		if name, ok := strings.CutPrefix(it, "@"); ok {
			if err := x.group(expr, name, depth); err != nil {
				return err
			}
			continue
		}
		if err := x.pattern(it); err != nil {
			return &Error{expr, err.Error()}
		}
	}
	return nil
}

func (x *expander) group(expr, name string, depth int) error {
	if x.groups == nil {
		return &Error{expr, fmt.Sprintf("@%s: no groups are defined here", name)}
	}
	if depth >= maxDepth {
		return &Error{expr, fmt.Sprintf("@%s: groups nest deeper than %d (a group that names itself?)", name, maxDepth)}
	}
	if x.refs++; x.refs > maxRefs {
		return &Error{expr, fmt.Sprintf("@%s: groups are named more than %d times over (groups that name groups?)", name, maxRefs)}
	}
	members, ok := x.groups(name)
	if !ok {
		return &Error{expr, fmt.Sprintf("no group @%s", name)}
	}
	for _, m := range members {
		if err := x.expr(m, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// split cuts expr at the commas outside brackets, trimming spaces; an
// empty item is an error.
func split(expr string) ([]string, error) {
	var items []string
	depth, start := 0, 0
	for i := 0; i <= len(expr); i++ {
		if i < len(expr) {
			switch expr[i] {
			case '[':
				if depth > 0 {
					return nil, errors.New("brackets inside brackets")
				}
				depth++
				continue
			case ']':
				if depth == 0 {
					return nil, errors.New("a ] without its [")
				}
				depth--
				continue
			case ',':
				if depth > 0 {
					continue
				}
			default:
				continue
			}
		} else if depth > 0 {
			return nil, errors.New("a [ without its ]")
		}
		it := strings.TrimSpace(expr[start:i])
		if it == "" {
			return nil, errors.New("an empty item (two commas in a row, or one at an end)")
		}
		items = append(items, it)
		start = i + 1
	}
	return items, nil
}

// rng is one range of a bracket: lo to hi by step, padded to pad digits.
type rng struct{ lo, hi, step, pad int }

// pattern adds the hosts of one item: text and bracketed ranges.
func (x *expander) pattern(it string) error {
	var texts []string
	var brackets [][]rng
	for {
		i := strings.IndexByte(it, '[')
		if i < 0 {
			texts = append(texts, it)
			break
		}
		j := strings.IndexByte(it, ']') // split checked the nesting
		texts = append(texts, it[:i])
		rs, err := ranges(it[i+1 : j])
		if err != nil {
			return err
		}
		brackets = append(brackets, rs)
		it = it[j+1:]
	}
	total := 1
	for _, rs := range brackets {
		n := 0
		for _, r := range rs {
			n += (r.hi-r.lo)/r.step + 1
			if n > x.max {
				break
			}
		}
		total *= n
		if total > x.max { // before the next product can overflow
			return fmt.Errorf("expands to more than %d hosts", x.max)
		}
	}
	// With the items before, plain names (no bracket) too.
	if x.items+total > x.max {
		return fmt.Errorf("expands to more than %d hosts", x.max)
	}
	x.items += total
	x.product(texts, brackets, texts[0])
	return nil
}

func (x *expander) product(texts []string, brackets [][]rng, prefix string) {
	if len(brackets) == 0 {
		if !x.seen[prefix] {
			x.seen[prefix] = true
			x.out = append(x.out, prefix)
		}
		return
	}
	for _, r := range brackets[0] {
		for v := r.lo; v <= r.hi; v += r.step {
			x.product(texts[1:], brackets[1:], prefix+pad(v, r.pad)+texts[1])
		}
	}
}

func pad(v, width int) string {
	s := strconv.Itoa(v)
	if len(s) < width {
		s = strings.Repeat("0", width-len(s)) + s
	}
	return s
}

// ranges reads "1-3,7,10-12/2" inside a bracket.
func ranges(s string) ([]rng, error) {
	var out []rng
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		body, stepText, stepped := strings.Cut(part, "/")
		loText, hiText, isRange := strings.Cut(body, "-")
		if !isRange {
			hiText = loText
		}
		lo, err := number(loText)
		if err != nil {
			return nil, fmt.Errorf("[%s]: %v", s, err)
		}
		hi, err := number(hiText)
		if err != nil {
			return nil, fmt.Errorf("[%s]: %v", s, err)
		}
		if hi < lo {
			return nil, fmt.Errorf("[%s]: %d-%d runs backwards", s, lo, hi)
		}
		step := 1
		if stepped {
			if step, err = number(stepText); err != nil || step == 0 {
				return nil, fmt.Errorf("[%s]: a step is a number from 1", s)
			}
		}
		p := 0
		if len(loText) > 1 && loText[0] == '0' {
			p = len(loText)
		}
		out = append(out, rng{lo, hi, step, p})
	}
	return out, nil
}

func number(s string) (int, error) {
	if s == "" {
		return 0, errors.New("a range needs numbers")
	}
	if len(s) > maxDigits {
		return 0, fmt.Errorf("%s has more than %d digits", cut(s, 12), maxDigits)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%q is not a number", s)
		}
	}
	return strconv.Atoi(s)
}

// Fold writes hosts as one expression: names that differ only in their
// last number share brackets (lab-1, lab-2, lab-3, lab-7 → lab-[1-3,7]),
// zero padding kept apart from unpadded numbers. The parts come sorted by
// name, numbers in numeric order; duplicates go.
func Fold(hosts []string) string {
	return strings.Join(FoldParts(hosts), ",")
}

// FoldParts is Fold's parts, one per bracketed stem or lone name.
func FoldParts(hosts []string) []string {
	type stem struct{ prefix, suffix string }
	type key struct {
		stem
		pad int
	}
	// Zero-padded widths per stem first: an unpadded number of such a
	// width (10 beside 01-09) joins them.
	widths := map[stem]map[int]bool{}
	for _, h := range hosts {
		if prefix, digits, suffix, ok := lastNumber(h); ok && len(digits) > 1 && digits[0] == '0' {
			st := stem{prefix, suffix}
			if widths[st] == nil {
				widths[st] = map[int]bool{}
			}
			widths[st][len(digits)] = true
		}
	}
	nums := map[key][]int{}
	var lone []string
	for _, h := range hosts {
		prefix, digits, suffix, ok := lastNumber(h)
		if !ok {
			lone = append(lone, h)
			continue
		}
		v, _ := strconv.Atoi(digits)
		k := key{stem{prefix, suffix}, 0}
		if widths[k.stem][len(digits)] {
			k.pad = len(digits)
		}
		nums[k] = append(nums[k], v)
	}
	type part struct {
		name  string // what it sorts by: the stem's prefix, or the lone name
		first int
		text  string
	}
	var parts []part
	for k, vs := range nums {
		sort.Ints(vs)
		vs = slices.Compact(vs)
		rs := Ranges(vs, k.pad)
		text := k.prefix + "[" + strings.Join(rs, ",") + "]" + k.suffix
		if len(vs) == 1 {
			text = k.prefix + rs[0] + k.suffix
		}
		parts = append(parts, part{k.prefix, vs[0], text})
	}
	sort.Strings(lone)
	for _, h := range slices.Compact(lone) {
		parts = append(parts, part{h, -1, h})
	}
	slices.SortFunc(parts, func(a, b part) int {
		return cmp.Or(strings.Compare(a.name, b.name), cmp.Compare(a.first, b.first), strings.Compare(a.text, b.text))
	})
	out := make([]string, len(parts))
	for i, p := range parts {
		out[i] = p.text
	}
	return out
}

// Ranges writes sorted numbers as runs: 1 2 3 7 → "1-3", "7", each
// number zero-padded to width digits.
func Ranges(vs []int, width int) []string {
	var rs []string
	for i := 0; i < len(vs); {
		j := i
		for j+1 < len(vs) && vs[j+1] == vs[j]+1 {
			j++
		}
		if j > i {
			rs = append(rs, pad(vs[i], width)+"-"+pad(vs[j], width))
		} else {
			rs = append(rs, pad(vs[i], width))
		}
		i = j + 1
	}
	return rs
}

// lastNumber splits h around its last run of digits (of at most
// maxDigits; a longer one is no number to fold).
func lastNumber(h string) (prefix, digits, suffix string, ok bool) {
	end := -1
	for i := len(h) - 1; i >= 0; i-- {
		if h[i] >= '0' && h[i] <= '9' {
			end = i + 1
			break
		}
	}
	if end < 0 {
		return "", "", "", false
	}
	start := end - 1
	for start > 0 && h[start-1] >= '0' && h[start-1] <= '9' {
		start--
	}
	if end-start > maxDigits {
		return "", "", "", false
	}
	return h[:start], h[start:end], h[end:], true
}

// Less orders hosts as people read them: lab-2 before lab-10.
func Less(a, b string) bool {
	pa, da, sa, oka := lastNumber(a)
	pb, db, sb, okb := lastNumber(b)
	if oka && okb && pa == pb {
		va, _ := strconv.Atoi(da)
		vb, _ := strconv.Atoi(db)
		if va != vb {
			return va < vb
		}
		if sa != sb {
			return sa < sb
		}
	}
	return a < b
}
