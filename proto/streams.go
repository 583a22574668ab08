package proto

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
)

// A worker's output stream carries its stdout and its stderr in the order
// the worker's pump forwarded them; a run of stdout is bracketed by two
// markers built from the worker's streams token, in the style of a cell's
// fence. The worker tells the token in its Ready (an adopted worker's too)
// and marks nothing before it has sent that frame; the hub, which reads
// the output and the frames apart, holds the output back until it has
// read the Ready. The markers:
//
//	"\x1e\x1f" + token + "1\x1f\x1e"   stdout begins
//	"\x1e\x1f" + token + "2\x1f\x1e"   stderr again
//
// Bytes outside a bracket are stderr, so whatever nobody marked (a crash's
// traceback written straight to the stream, sudo's words before the
// worker runs) counts as stderr.

// NewStreamsToken returns a fresh token: 16 hex digits.
func NewStreamsToken() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ValidStreamsToken says whether t may be used as a token: 8 to 64 hex
// digits, so that it can be passed in argv and never holds a marker byte.
func ValidStreamsToken(t string) bool {
	if len(t) < 8 || len(t) > 64 {
		return false
	}
	_, err := hex.DecodeString(t)
	return err == nil && len(t)%2 == 0
}

// StreamMarkers returns the markers that begin a stdout run and end it.
func StreamMarkers(token string) (stdout, stderr []byte) {
	m := func(kind byte) []byte {
		return append(append([]byte("\x1e\x1f"), token...), kind, 0x1f, 0x1e)
	}
	return m('1'), m('2')
}

// Splitter splits one output stream into its stdout and stderr runs,
// dropping the markers, across any chunking of the stream: a marker cut
// by a read is held back until the rest comes. The zero value (no token)
// takes every byte as stderr. Not safe for concurrent use.
type Splitter struct {
	prefix []byte // "\x1e\x1f" + token: what both markers begin with
	marker int    // a marker's length
	stdout bool   // inside a stdout run
	carry  []byte // the start of a marker, held back
}

// NewSplitter splits a stream marked with token ("" marks nothing).
func NewSplitter(token string) *Splitter {
	d := &Splitter{}
	if token != "" {
		d.prefix = append([]byte("\x1e\x1f"), token...)
		d.marker = len(d.prefix) + 3
	}
	return d
}

// Split calls emit for each run of p, in order, with the stream it belongs
// to (stdout or not); b is only valid during the call, and is never
// empty.
func (d *Splitter) Split(p []byte, emit func(stdout bool, b []byte)) {
	if d.marker == 0 {
		if len(p) > 0 {
			emit(false, p)
		}
		return
	}
	data := p
	if len(d.carry) > 0 {
		data = append(d.carry, p...)
		d.carry = nil
	}
	for len(data) > 0 {
		i := bytes.Index(data, d.prefix)
		if i < 0 {
			k := d.partialAtEnd(data)
			d.emit(data[:len(data)-k], emit)
			if k > 0 {
				d.carry = append([]byte(nil), data[len(data)-k:]...)
			}
			return
		}
		if len(data)-i < d.marker {
			// A marker's head, or bytes that only begin like one: which,
			// the next chunk says.
			d.emit(data[:i], emit)
			d.carry = append([]byte(nil), data[i:]...)
			return
		}
		m := data[i : i+d.marker]
		kind, tail := m[len(d.prefix)], m[len(d.prefix)+1:]
		if (kind != '1' && kind != '2') || tail[0] != 0x1f || tail[1] != 0x1e {
			// Not a marker after all: its first byte is output.
			d.emit(data[:i+1], emit)
			data = data[i+1:]
			continue
		}
		d.emit(data[:i], emit)
		d.stdout = kind == '1'
		data = data[i+d.marker:]
	}
}

// Flush ends the stream, which starts again outside any run. What was
// held back is output after all if it is too short to hold any of the
// token ("\x1e", "\x1e\x1f"); a marker's head, torn by a worker that died
// mid-write, is dropped.
func (d *Splitter) Flush(emit func(stdout bool, b []byte)) {
	if len(d.carry) < 3 {
		d.emit(d.carry, emit)
	}
	d.carry = nil
	d.stdout = false
}

func (d *Splitter) emit(b []byte, emit func(bool, []byte)) {
	if len(b) > 0 {
		emit(d.stdout, b)
	}
}

// partialAtEnd is the length of the longest end of data that is the start
// of a marker (shorter than the common prefix: a longer one was found by
// Index).
func (d *Splitter) partialAtEnd(data []byte) int { return PrefixAtEnd(data, d.prefix) }

// PrefixAtEnd returns the length of the longest suffix of data that is a
// proper prefix of marker (a fence, a stream marker) cut by a read.
func PrefixAtEnd(data, marker []byte) int {
	for k := min(len(marker)-1, len(data)); k > 0; k-- {
		if bytes.Equal(data[len(data)-k:], marker[:k]) {
			return k
		}
	}
	return 0
}
