package lean

// The lines a call on a terminal reads before its reply: a streaming
// exec's output (wire.Event) and a group's progress (wire.Progress).

// EventOut is the kind of an event that carries output (wire.EventOut).
const EventOut = "out"

// ParseEvent reads a line that holds an event, as the hub writes
// wire.Reply{V, Event} (newline optional), when the event has only
// strings, integers and booleans (a streaming exec's): the protocol
// version, the event's kind and its text. ok is false for any other line,
// and for one encoding/json would read otherwise or refuse.
func ParseEvent(line []byte) (v int, kind, text string, ok bool) {
	v, ms, ok := parseNews(line, `,"event":`)
	if !ok {
		return 0, "", "", false
	}
	for _, m := range ms {
		switch m.key {
		case "kind", "code", "by", "text":
			ok = m.typ == isString
		case "cell":
			ok = m.typ == isInt
		case "mine":
			ok = m.typ == isBool
		case "result", "info":
			ok = false // objects, which encoding/json refuses as anything else
		}
		if !ok {
			return 0, "", "", false
		}
		switch m.key {
		case "kind":
			kind = m.str
		case "text":
			text = m.str
		}
	}
	return v, kind, text, true
}

// Progress is the part of wire.Progress that a terminal shows: a group's
// Hosts, how many are Done, how many of those Failed.
type Progress struct {
	Session             string
	Hosts, Done, Failed int
}

// ParseProgress reads a line that holds a cell's progress, as the hub
// writes wire.Reply{V, Progress} (newline optional). ok is false for any
// other line, and for one encoding/json would read otherwise or refuse.
func ParseProgress(line []byte) (v int, p Progress, ok bool) {
	v, ms, ok := parseNews(line, `,"progress":`)
	if !ok {
		return 0, Progress{}, false
	}
	for _, m := range ms {
		switch m.key {
		case "session":
			ok = m.typ == isString
			p.Session = m.str
		case "cell", "elapsed_ms", "output_chars":
			ok = m.typ == isInt
		case "hosts":
			ok = m.typ == isInt
			p.Hosts = m.num
		case "done":
			ok = m.typ == isInt
			p.Done = m.num
		case "failed":
			ok = m.typ == isInt
			p.Failed = m.num
		}
		if !ok {
			return 0, Progress{}, false
		}
	}
	return v, p, true
}

// parseNews reads `{"v":N` name {members}}` with an optional newline:
// the version and the flat object's members.
func parseNews(line []byte, name string) (v int, ms []member, ok bool) {
	v, b, ok := replyVersion(line)
	if ok {
		b, ok = skip(b, name)
	}
	if ok {
		ms, b, ok = parseFlat(b)
	}
	if ok {
		b, ok = skip(b, `}`)
	}
	if !ok || len(b) > 1 || len(b) == 1 && b[0] != '\n' {
		return 0, nil, false
	}
	return v, ms, true
}

// A member's value is a string, an integer or a boolean.
const (
	isString = iota
	isInt
	isBool
)

// member is one of a flat JSON object's.
type member struct {
	key string
	typ int
	str string
	num int // an integer's, or 1 for true
}

// parseFlat reads a JSON object, as encoding/json writes one, whose
// values are strings, integers (that an int holds) or booleans, and
// whose keys are lower-case ASCII letters and underscores: encoding/json
// matches a key to a field without regard to case, and such a key matches
// only the field of its own name.
func parseFlat(b []byte) (ms []member, rest []byte, ok bool) {
	if b, ok = skip(b, `{`); !ok {
		return nil, b, false
	}
	if b, ok = skip(b, `}`); ok {
		return nil, b, true
	}
	for {
		var m member
		if m.key, b, ok = parseString(b); !ok || !lowerKey(m.key) {
			return nil, b, false
		}
		if b, ok = skip(b, `:`); !ok {
			return nil, b, false
		}
		switch {
		case len(b) > 0 && b[0] == '"':
			m.typ = isString
			m.str, b, ok = parseString(b)
		case len(b) > 0 && (b[0] == 't' || b[0] == 'f'):
			m.typ = isBool
			if b, ok = skip(b, "true"); ok {
				m.num = 1
			} else {
				b, ok = skip(b, "false")
			}
		default:
			m.typ = isInt
			m.num, b, ok = parseWholeInt(b)
			// 1.5 or 1e3 is a number, but not one an int takes.
			ok = ok && (len(b) == 0 || b[0] != '.' && b[0] != 'e' && b[0] != 'E')
		}
		if !ok {
			return nil, b, false
		}
		ms = append(ms, m)
		if b, ok = skip(b, `}`); ok {
			return ms, b, true
		}
		if b, ok = skip(b, `,`); !ok {
			return nil, b, false
		}
	}
}

func lowerKey(k string) bool {
	for i := 0; i < len(k); i++ {
		if c := k[i]; (c < 'a' || c > 'z') && c != '_' {
			return false
		}
	}
	return k != ""
}

// IsNews reports whether line holds an event or a progress (which come
// before a reply), whether or not ParseEvent or ParseProgress can read it.
func IsNews(line []byte) bool {
	_, b, ok := replyVersion(line)
	if !ok {
		return false
	}
	_, event := skip(b, `,"event":`)
	_, progress := skip(b, `,"progress":`)
	return event || progress
}
