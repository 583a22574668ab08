// Package remote owns ssh: resolving a host through ssh_config, dialing it
// through its jump hosts (or a ProxyCommand) with host-key checks and
// key-only auth, one shared connection per route with keepalives, and
// starting a worker on a channel of it with nothing installed on the host.
//
// It speaks ssh itself with golang.org/x/crypto/ssh; it never runs the ssh
// binary. It knows nothing of sessions: the hub wraps a Worker as one.
package remote

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// IdleTimeout is how long a connection is kept after its last channel
// closed, so the next session on the route starts without a handshake.
const IdleTimeout = 10 * time.Minute

// Pool keeps one connection per route. Its zero value is ready to use.
type Pool struct {
	// Logf, when non-nil, receives connection events.
	Logf func(format string, args ...any)

	mu    sync.Mutex
	conns map[string]*Conn
}

// Conn is one route's connection, shared by every session on it.
type Conn struct {
	pool  *Pool
	route Route
	key   string

	ready chan struct{} // closed when dialed (or failed)
	err   error

	hops   []hopClient
	client *ssh.Client // the target's

	mu      sync.Mutex
	refs    int
	idle    *time.Timer
	lost    chan struct{} // closed when the link is gone
	lostErr error
	closed  bool
}

// LinkError says a route's connection was lost.
type LinkError struct {
	Host   string
	Reason string
}

func (e *LinkError) Error() string { return fmt.Sprintf("link to %s lost: %s", e.Host, e.Reason) }

func (p *Pool) logf(format string, args ...any) {
	if p.Logf != nil {
		p.Logf(format, args...)
	}
}

// Get returns the connection of route, dialing it if there is none, and
// holds a reference on it; the caller must Release it.
func (p *Pool) Get(ctx context.Context, route Route, env Env) (*Conn, error) {
	key := route.Key()
	p.mu.Lock()
	if p.conns == nil {
		p.conns = map[string]*Conn{}
	}
	c := p.conns[key]
	if c != nil {
		c.mu.Lock()
		dead := c.closed
		if !dead {
			c.refs++
			if c.idle != nil {
				c.idle.Stop()
				c.idle = nil
			}
		}
		c.mu.Unlock()
		if dead {
			c = nil
		}
	}
	if c == nil {
		c = &Conn{pool: p, route: route, key: key, ready: make(chan struct{}), lost: make(chan struct{}), refs: 1}
		p.conns[key] = c
		go c.dial(route, env)
	}
	p.mu.Unlock()
	select {
	case <-c.ready:
	case <-ctx.Done():
		c.Release()
		return nil, ctx.Err()
	}
	if c.err != nil {
		c.Release()
		return nil, c.err
	}
	return c, nil
}

// dial connects the route. It runs on its own, so that a caller that gives
// up does not leave a half-made connection for the next one.
func (c *Conn) dial(route Route, env Env) {
	defer close(c.ready)
	t := route.Target()
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(len(route.Hops))*t.ConnectTimeout+time.Second)
	defer cancel()
	hops, err := dialRoute(ctx, route, env)
	if err != nil {
		c.err = err
		c.pool.drop(c)
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		close(c.lost)
		return
	}
	c.hops = hops
	c.client = hops[len(hops)-1].client
	c.pool.logf("connected to %s", route)
	go c.keepalive(t.ServerAliveInterval, t.ServerAliveCountMax)
	go func() {
		err := c.client.Wait()
		reason := "the connection closed"
		if err != nil {
			reason = err.Error()
		}
		c.markLost(reason)
	}()
}

// keepalive sends keepalive@openssh.com every interval. Each request is
// sent from its own goroutine, so a half-open connection whose writes block
// cannot stop the loop from counting misses; countMax misses in a row close
// the connection.
func (c *Conn) keepalive(interval time.Duration, countMax int) {
	t := time.NewTicker(interval)
	defer t.Stop()
	misses := 0
	answered := make(chan struct{}, 1)
	for {
		select {
		case <-c.lost:
			return
		case <-t.C:
		}
		select {
		case <-answered:
			misses = 0
		default:
		}
		go func() {
			if _, _, err := c.client.SendRequest("keepalive@openssh.com", true, nil); err == nil {
				select {
				case answered <- struct{}{}:
				default:
				}
			}
		}()
		select {
		case <-answered:
			misses = 0
			continue
		case <-c.lost:
			return
		case <-time.After(interval):
		}
		misses++
		if misses >= countMax {
			c.markLost(fmt.Sprintf("no answer to %d keepalives %s apart", misses, interval))
			return
		}
	}
}

// markLost records why the link is gone and closes it; every channel on it
// then ends.
func (c *Conn) markLost(reason string) {
	c.mu.Lock()
	if c.lostErr != nil {
		c.mu.Unlock()
		return
	}
	c.lostErr = &LinkError{Host: c.route.Target().Alias, Reason: reason}
	c.closed = true
	c.mu.Unlock()
	c.pool.logf("%v", c.lostErr)
	c.pool.drop(c)
	close(c.lost)
	c.closeHops()
}

func (c *Conn) closeHops() {
	for i := len(c.hops) - 1; i >= 0; i-- {
		c.hops[i].client.Close()
		if c.hops[i].closer != nil {
			c.hops[i].closer.Close()
		}
	}
}

// LostErr returns why the link was lost, or nil while it is up.
func (c *Conn) LostErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lostErr
}

// Release drops a reference; the last one starts the idle timer.
func (c *Conn) Release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refs--
	if c.refs > 0 || c.closed {
		return
	}
	c.idle = time.AfterFunc(IdleTimeout, func() {
		c.mu.Lock()
		if c.refs > 0 || c.closed {
			c.mu.Unlock()
			return
		}
		c.closed = true
		c.mu.Unlock()
		c.pool.drop(c)
		c.pool.logf("closing idle connection to %s", c.route)
		c.closeHops()
	})
}

func (p *Pool) drop(c *Conn) {
	p.mu.Lock()
	if p.conns[c.key] == c {
		delete(p.conns, c.key)
	}
	p.mu.Unlock()
}

// Close closes every connection (the hub is stopping).
func (p *Pool) Close() {
	p.mu.Lock()
	var all []*Conn
	for _, c := range p.conns {
		all = append(all, c)
	}
	p.conns = nil
	p.mu.Unlock()
	for _, c := range all {
		<-c.ready
		if c.err == nil {
			c.markLost("the hub stopped")
		}
	}
}

// Route is the route this connection serves.
func (c *Conn) Route() Route { return c.route }
