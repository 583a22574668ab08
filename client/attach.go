package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/replhub/replhub/wire"
)

// Attachment is a console's connection to a session (wire.OpAttach): its
// events arrive on Events, which is closed when the session ends or the
// connection does; Exec and Interrupt go on the same connection. Close
// detaches; the session goes on.
type Attachment struct {
	// Hello is the attached event: the session, its running cell and its
	// unread output.
	Hello *wire.Event
	// Events carries every later event, in order.
	Events <-chan *wire.Event
	// Ended says, once Events is closed, how the attach ended: the hub's
	// last message, or why the connection broke.
	Ended string

	k    *conn
	wmu  sync.Mutex
	once sync.Once
}

// Attach opens a console on session name.
func (c *Client) Attach(ctx context.Context, name string) (*Attachment, error) {
	uc, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	k := &conn{c: uc, r: bufio.NewReaderSize(uc, 1<<16)}
	req := wire.Request{V: wire.Version, Op: wire.OpAttach, Name: name, Surface: c.Surface}
	if err := wire.WriteRequest(uc, req); err != nil {
		uc.Close()
		return nil, ErrHubGone
	}
	first, err := readReply(k)
	if err != nil {
		uc.Close()
		return nil, err
	}
	if first.Err != nil {
		uc.Close()
		return nil, first.Err
	}
	if first.Event == nil || first.Event.Kind != wire.EventAttached {
		uc.Close()
		return nil, fmt.Errorf("client: the hub did not attach (is it older than this client? `replhub restart` updates it)")
	}
	events := make(chan *wire.Event, 256)
	a := &Attachment{Hello: first.Event, Events: events, k: k}
	go func() {
		defer close(events)
		for {
			rep, err := readReply(k)
			if err != nil {
				a.Ended = "the connection to the hub broke"
				return
			}
			if rep.Event == nil {
				a.Ended = rep.Message
				if rep.Err != nil {
					a.Ended = rep.Err.Message
				}
				return
			}
			events <- rep.Event
		}
	}()
	return a, nil
}

func readReply(k *conn) (*wire.Reply, error) {
	line, err := wire.ReadLine(k.r, wire.MaxLine)
	if err != nil {
		return nil, ErrHubGone
	}
	return ParseReply(line)
}

func (a *Attachment) send(req wire.Request) error {
	a.wmu.Lock()
	defer a.wmu.Unlock()
	req.V = wire.Version
	if err := wire.WriteRequest(a.k.c, req); err != nil {
		return ErrHubGone
	}
	return nil
}

// Exec runs code as the session's next cell; its output and result come
// as events (a done event with Mine set, or a refused one).
func (a *Attachment) Exec(code string) error {
	return a.send(wire.Request{Op: wire.OpExec, Code: code})
}

// Interrupt raises KeyboardInterrupt in the session's running cell.
func (a *Attachment) Interrupt() error {
	return a.send(wire.Request{Op: wire.OpInterrupt})
}

// Close detaches.
func (a *Attachment) Close() error {
	var err error
	a.once.Do(func() { err = a.k.c.Close() })
	return err
}

// Check says whether text is a whole statement in session name (see
// wire.OpCheck): wire.CheckComplete, CheckIncomplete or CheckInvalid.
func (c *Client) Check(ctx context.Context, name, text string) (string, error) {
	a, err := c.query(ctx, wire.Request{Op: wire.OpCheck, Name: name, Text: text, Wait: -1})
	if err != nil {
		return "", err
	}
	if a == nil || a.Check == "" {
		return "", errors.New("client: the hub gave no check (is it older than this client?)")
	}
	return a.Check, nil
}
