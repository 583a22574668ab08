package hub

// outputs is a session's unread output, kept once (outBuf), merged and
// each stream cut from it on take.
type outputs struct {
	buf outBuf
	// tap, when set, sees every write first (watch.go); when it returns
	// true, a reader took the bytes and no buffer keeps them.
	tap func(p []byte) bool
	// let, when set, is told of a flood's memory let go (trim.go).
	let func()
}

// output is outputs made ready for a reply.
type output struct{ all, stdout, stderr rendered }

func (o *outputs) len() int { return o.buf.len() }

func (o *outputs) write(stdout bool, p []byte) {
	if len(p) == 0 || (o.tap != nil && o.tap(p)) {
		return
	}
	o.buf.write(stdout, p)
}

// takeOut empties the buffer and returns what it held, not yet rendered:
// a reply renders it under its caller's cap.
func (o *outputs) takeOut() *outBuf {
	b := o.buf
	o.buf = outBuf{}
	return &b
}

// take renders the unread output for a reply under ReplyCap and empties
// the buffer.
func (o *outputs) take() output { return o.takeCap(ReplyCap) }

// takeCap is take under a cap of limit characters, each stream alike.
func (o *outputs) takeCap(limit int) output {
	b := o.takeOut()
	out := b.render(limit)
	o.letGo(b)
	return out
}

// peek renders the unread output, merged, and leaves it unread.
func (o *outputs) peek() rendered { return o.buf.renderAll(ReplyCap) }

// letGo tells the trimmer when b, let go, held a flood.
func (o *outputs) letGo(b *outBuf) {
	if o.let != nil && b != nil && b.size() >= floodSize {
		o.let()
	}
}
