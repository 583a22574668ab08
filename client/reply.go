package client

import (
	"encoding/json"
	"fmt"

	"github.com/replhub/replhub/wire"
)

// replyLine is a wire.Reply as it is read: each part stays raw until it is
// known to be there. encoding/json prepares, at a type's first use, the
// decoders of every type it can reach; wire.Reply reaches all of the
// protocol's (results, session lists, answers, events), and preparing them
// took a one-shot CLI call longer than its round trip to the hub. Decoded
// part by part, a call prepares only what its reply holds.
//
// It has a field for each of wire.Reply's, with the same JSON name
// (TestReplyLineCoversReply).
type replyLine struct {
	V        int             `json:"v"`
	Plain    json.RawMessage `json:"plain"`
	Message  string          `json:"message"`
	Progress json.RawMessage `json:"progress"`
	Err      json.RawMessage `json:"err"`
	Result   json.RawMessage `json:"result"`
	Sessions json.RawMessage `json:"sessions"`
	Stream   json.RawMessage `json:"stream"`
	Swaps    json.RawMessage `json:"swaps"`
	Answer   json.RawMessage `json:"answer"`
	Event    json.RawMessage `json:"event"`
}

// resultLine is a wire.Result as it is read: its rarer parts, whose types
// reach far (a new session's info, display items, a group's hosts), stay
// raw until they are there. They hide the embedded Result's fields of the
// same JSON names (encoding/json's rule for embedded fields), which so are
// never prepared.
type resultLine struct {
	wire.Result
	Created json.RawMessage `json:"created"`
	Display json.RawMessage `json:"display"`
	Fan     json.RawMessage `json:"fan"`
}

// decodeResult decodes a result as json.Unmarshal into a *wire.Result
// would.
func decodeResult(raw json.RawMessage) (*wire.Result, error) {
	var l *resultLine
	if err := json.Unmarshal(raw, &l); err != nil || l == nil {
		return nil, err
	}
	r := &l.Result
	if err := decodeParts(part{l.Created, &r.Created}, part{l.Display, &r.Display}, part{l.Fan, &r.Fan}); err != nil {
		return nil, err
	}
	return r, nil
}

// part is a raw part of a line and where it decodes to.
type part struct {
	raw json.RawMessage
	to  any
}

// decodeParts decodes each part that is there.
func decodeParts(parts ...part) error {
	for _, p := range parts {
		if len(p.raw) == 0 {
			continue
		}
		if err := json.Unmarshal(p.raw, p.to); err != nil {
			return err
		}
	}
	return nil
}

// decodeReply decodes a reply line as json.Unmarshal into a wire.Reply
// would, the parts it has only.
func decodeReply(line []byte) (*wire.Reply, error) {
	var l replyLine
	if err := json.Unmarshal(line, &l); err != nil {
		return nil, err
	}
	rep := &wire.Reply{V: l.V, Message: l.Message}
	if len(l.Result) > 0 {
		r, err := decodeResult(l.Result)
		if err != nil {
			return nil, err
		}
		rep.Result = r
	}
	if err := decodeParts(part{l.Plain, &rep.Plain}, part{l.Progress, &rep.Progress}, part{l.Err, &rep.Err}, part{l.Sessions, &rep.Sessions},
		part{l.Stream, &rep.Stream}, part{l.Swaps, &rep.Swaps}, part{l.Answer, &rep.Answer}, part{l.Event, &rep.Event}); err != nil {
		return nil, err
	}
	return rep, nil
}

// ParseReply decodes a reply line; a reply of another protocol version is
// an error that says what to do.
func ParseReply(line []byte) (*wire.Reply, error) {
	rep, err := decodeReply(line)
	if err != nil {
		return nil, fmt.Errorf("client: malformed reply from hub: %v", err)
	}
	if rep.V != wire.Version && rep.Err == nil && rep.Progress == nil && rep.Event == nil {
		return nil, &wire.Error{Code: wire.CodeVersion, Message: fmt.Sprintf("the hub speaks protocol %d, this client %d: run `replhub stop` and try again (sessions end)", rep.V, wire.Version)}
	}
	return rep, nil
}
