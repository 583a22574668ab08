package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"time"

	"github.com/chzyer/readline"

	"github.com/replhub/replhub/client"
	"github.com/replhub/replhub/wire"
)

// console is one attach: the line editor on the main goroutine, the
// session's events on another (show), which also says when this
// console's own cell has ended.
type console struct {
	ctx context.Context
	c   *client.Client
	a   *client.Attachment
	rl  *readline.Instance
	// closeEditor closes the line editor, ending a Readline under way.
	closeEditor func()
	// save writes a result's images to files, as exec does.
	save  func(*wire.Result) error
	name  string
	paint painter

	mu        sync.Mutex
	out       io.Writer
	prompting bool          // the editor shows a prompt
	open      bool          // output left a line open
	partial   string        // the start of a line held back above the prompt
	mine      chan struct{} // closed when this console's cell ends
	detach    bool          // Ctrl-] was pressed
	leaving   bool          // the person detached
	died      bool          // the session died under the console
	broken    bool          // the hub went away under the console
	ended     chan struct{} // closed when the events end
}

// filter turns Ctrl-] into an interrupt of the editor that detaches.
func (k *console) filter(r rune) (rune, bool) {
	if r == ctrlBracket {
		k.mu.Lock()
		k.detach = true
		k.mu.Unlock()
		return readline.CharInterrupt, true
	}
	return r, true
}

func (k *console) run() error {
	k.ended = make(chan struct{})
	k.hello()
	go k.show()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt)
	defer signal.Stop(sig)
	var lines []string
	for {
		prompt := ">>> "
		if len(lines) > 0 {
			prompt = "... "
		}
		k.rl.SetPrompt(k.paint.prompt(prompt))
		k.setPrompting(true)
		line, err := k.rl.Readline()
		k.setPrompting(false)
		select {
		case <-k.ended:
			return nil
		default:
		}
		k.mu.Lock()
		detach := k.detach
		k.mu.Unlock()
		if detach || errors.Is(err, io.EOF) {
			k.mu.Lock()
			k.leaving = true
			k.mu.Unlock()
			return nil
		}
		if errors.Is(err, readline.ErrInterrupt) {
			lines = nil
			continue
		}
		if err != nil {
			return fmt.Errorf("attach: %w", err)
		}
		lines = append(lines, line)
		src := strings.Join(lines, "\n")
		if strings.TrimSpace(src) == "" {
			lines = nil
			continue
		}
		if k.more(src, lines) {
			continue
		}
		lines = nil
		if !k.runCell(src, sig) {
			return nil
		}
	}
}

// more says whether src needs more lines, as the session's own Python
// decides (codeop); when the session cannot answer, a line that opens a
// block or continues one asks for more.
func (k *console) more(src string, lines []string) bool {
	ctx, cancel := context.WithTimeout(k.ctx, 5*time.Second)
	defer cancel()
	check, err := k.c.Check(ctx, k.name, src)
	if err != nil {
		last := strings.TrimRight(lines[len(lines)-1], " \t")
		return strings.HasSuffix(last, ":") || strings.HasSuffix(last, "\\") || (len(lines) > 1 && last != "")
	}
	return check == wire.CheckIncomplete
}

// runCell runs src and waits for its end; Ctrl-C meanwhile interrupts it.
// It returns false when the session or the connection ended.
func (k *console) runCell(src string, sig chan os.Signal) bool {
	done := make(chan struct{})
	k.mu.Lock()
	k.mine = done
	k.mu.Unlock()
	for len(sig) > 0 {
		<-sig
	}
	if err := k.a.Exec(src); err != nil {
		k.print(k.paint.err("[the hub is gone: "+err.Error()+"]") + "\n")
		return false
	}
	for {
		select {
		case <-done:
			return true
		case <-sig:
			k.print("\n") // after the terminal's ^C
			k.a.Interrupt()
		case <-k.ended:
			return false
		}
	}
}

func (k *console) setPrompting(on bool) {
	k.mu.Lock()
	k.prompting = on
	k.mu.Unlock()
}

// print writes text. Above the prompt only whole lines go (the editor
// redraws its prompt after each write): the start of a line waits for its
// end, or for endLine.
func (k *console) print(text string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	text = k.partial + text
	k.partial = ""
	if k.prompting {
		i := strings.LastIndexByte(text, '\n')
		text, k.partial = text[:i+1], text[i+1:]
	}
	if text == "" {
		return
	}
	io.WriteString(k.out, text)
	k.open = !strings.HasSuffix(text, "\n")
}

// endLine ends a line that output left open, or holds back.
func (k *console) endLine() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.open || k.partial != "" {
		io.WriteString(k.out, k.partial+"\n")
		k.partial, k.open = "", false
	}
}

func (k *console) hello() {
	h := k.a.Hello
	where := "local"
	if h.Info != nil {
		if h.Info.Host != "" && h.Info.Host != "local" {
			where = "on " + h.Info.Host
		}
		if h.Info.Root {
			where += ", as root"
		}
		where = fmt.Sprintf("python %s, %s, cwd %s", h.Info.Python, where, h.Info.Cwd)
	}
	k.print(k.paint.note(fmt.Sprintf("[attached to '%s' (%s); Ctrl-D or Ctrl-] detaches, Ctrl-C interrupts a running cell]", k.name, where)) + "\n")
	if h.Text != "" {
		k.print(k.paint.note("[output nobody has read yet:]") + "\n")
		k.print(h.Text)
		k.endLine()
	}
	if h.Cell > 0 {
		k.print(k.paint.note(fmt.Sprintf("[cell %d is running]", h.Cell)) + "\n")
	}
}

// show prints the session's events until they end.
func (k *console) show() {
	defer func() {
		close(k.ended)
		k.closeEditor()
	}()
	died := false
	for ev := range k.a.Events {
		switch ev.Kind {
		case wire.EventOut:
			k.print(ev.Text)
		case wire.EventCell:
			k.endLine()
			by := "another client"
			switch ev.By {
			case wire.ByAttach:
				by = "another console"
			case wire.ByAgent:
				by = "the agent"
			}
			var b strings.Builder
			b.WriteString(k.paint.note(fmt.Sprintf("[cell %d, from %s]", ev.Cell, by)) + "\n")
			for i, l := range strings.Split(strings.TrimRight(ev.Code, "\n"), "\n") {
				p := "... "
				if i == 0 {
					p = ">>> "
				}
				b.WriteString(k.paint.note(p+l) + "\n")
			}
			k.print(b.String())
		case wire.EventDone:
			k.endLine()
			if r := ev.Result; r != nil && len(r.Display) > 0 {
				// Images and formatted results: saved, and shown as exec
				// shows them.
				if ev.Mine {
					if err := k.save(r); err != nil {
						k.print(k.paint.err("["+err.Error()+"]") + "\n")
					}
				}
				k.print(r.Text())
			} else if r != nil {
				k.print(k.result(r))
			}
			if ev.Mine {
				k.ownEnded()
			}
		case wire.EventQueued:
			k.endLine()
			k.print(k.paint.note("["+ev.Text+"]") + "\n")
		case wire.EventRefused:
			k.endLine()
			k.print(k.paint.err("["+ev.Text+"]") + "\n")
			k.ownEnded()
		case wire.EventDead:
			died = true
			k.mu.Lock()
			k.died = true
			k.mu.Unlock()
			k.endLine()
			k.print(k.paint.err(fmt.Sprintf("[session '%s' ended: %s]", k.name, ev.Text)) + "\n")
		}
	}
	k.endLine()
	k.mu.Lock()
	leaving := k.leaving
	k.mu.Unlock()
	if !leaving && !died {
		// The hub went away (it stopped or restarted): the session may
		// live on, but this console cannot.
		k.print(k.paint.err("["+k.a.Ended+"; `replhub attach "+k.name+"` attaches again]") + "\n")
		k.mu.Lock()
		k.broken = true
		k.mu.Unlock()
	}
}

func (k *console) ownEnded() {
	k.mu.Lock()
	if k.mine != nil {
		close(k.mine)
		k.mine = nil
	}
	k.mu.Unlock()
}

// result renders a cell's end: notes, the output it did not stream, the
// traceback, the value.
func (k *console) result(r *wire.Result) string {
	var b strings.Builder
	line := func(s string) {
		b.WriteString(s)
		if !strings.HasSuffix(s, "\n") {
			b.WriteByte('\n')
		}
	}
	for _, n := range r.Notes {
		line(k.paint.note("[" + n + "]"))
	}
	if r.Output != "" {
		line(r.Output)
	}
	if e := r.Error; e != nil {
		t := e.Traceback
		if t == "" {
			t = e.Type + ": " + e.Message
		}
		line(k.paint.err(strings.TrimRight(t, "\n")))
	}
	if r.Value != nil {
		line(k.paint.value(fmt.Sprintf("Out[%d]: ", r.Cell)) + *r.Value)
	}
	if r.Status == wire.StatusDead {
		line(k.paint.err("[" + r.Death + "]"))
	}
	return b.String()
}
