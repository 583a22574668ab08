package sshtest

import (
	"fmt"
	"io"
	"net"
	"sync"
)

// Relay is a TCP relay on loopback in front of an address: the path a
// link takes, which a test cuts and restores as a network would.
type Relay struct {
	Port int

	ln net.Listener
	wg sync.WaitGroup

	mu     sync.Mutex
	target string
	down   bool // new connections are reset
	closed bool
	// held, when set, is closed by Release: until then new connections
	// are accepted and left waiting, not a byte passed either way.
	held  chan struct{}
	conns []*relayed
	// back, when set, is closed by Resume: until then the bytes from the
	// target to the client wait (a link slow one way).
	back chan struct{}
}

// relayed is one connection through the relay.
type relayed struct {
	a, b    *net.TCPConn
	frozen  bool          // bytes are held, not passed (under Relay.mu)
	release chan struct{} // closed when the pair is reset
	once    sync.Once
}

func (p *relayed) reset() {
	p.once.Do(func() {
		reset(p.a)
		reset(p.b)
		close(p.release)
	})
}

// NewRelay listens on 127.0.0.1 and forwards every connection to target;
// it is closed in t.Cleanup.
func NewRelay(t TB, target string) *Relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &Relay{Port: ln.Addr().(*net.TCPAddr).Port, ln: ln, target: target}
	r.wg.Add(1)
	go r.serve()
	t.Cleanup(r.Close)
	return r
}

// Addr is 127.0.0.1:port.
func (r *Relay) Addr() string { return fmt.Sprintf("127.0.0.1:%d", r.Port) }

func (r *Relay) serve() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		a := c.(*net.TCPConn)
		r.mu.Lock()
		refuse := r.down || r.closed
		r.mu.Unlock()
		if refuse {
			reset(a)
			continue
		}
		r.mu.Lock()
		held := r.held
		r.mu.Unlock()
		if held == nil {
			r.connect(a)
			continue
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			<-held
			r.connect(a)
		}()
	}
}

// connect relays a to the target, or resets it while the relay is down.
func (r *Relay) connect(a *net.TCPConn) {
	r.mu.Lock()
	target, refuse := r.target, r.down || r.closed
	r.mu.Unlock()
	if refuse {
		reset(a)
		return
	}
	bc, err := net.Dial("tcp", target)
	if err != nil {
		reset(a)
		return
	}
	p := &relayed{a: a, b: bc.(*net.TCPConn), release: make(chan struct{})}
	r.mu.Lock()
	r.conns = append(r.conns, p)
	r.mu.Unlock()
	r.wg.Add(2)
	go r.pipe(p, p.a, p.b)
	go r.pipe(p, p.b, p.a)
}

// Hold makes the relay accept new connections and leave them waiting,
// saying nothing, until Release (or Drop, which then resets them): a
// host that takes the connection and never answers.
func (r *Relay) Hold() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held == nil {
		r.held = make(chan struct{})
	}
}

// Release lets the connections Hold left waiting through, and new ones.
func (r *Relay) Release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held != nil {
		close(r.held)
		r.held = nil
	}
}

// pipe copies src to dst until either ends; a frozen pair's bytes are
// held until it is reset.
func (r *Relay) pipe(p *relayed, dst, src *net.TCPConn) {
	defer r.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			r.mu.Lock()
			frozen, back := p.frozen, r.back
			r.mu.Unlock()
			if back != nil && src == p.b {
				select {
				case <-back:
				case <-p.release:
					return
				}
			}
			if frozen {
				<-p.release
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err == io.EOF {
				dst.CloseWrite()
			} else {
				p.reset()
			}
			return
		}
	}
}

func reset(c *net.TCPConn) {
	c.SetLinger(0)
	c.Close()
}

// Drop resets every connection through the relay, both ways, and every
// new one until Restore: a link that broke.
func (r *Relay) Drop() {
	r.mu.Lock()
	r.down = true
	conns := r.conns
	r.conns = nil
	r.mu.Unlock()
	r.Release()
	for _, p := range conns {
		p.reset()
	}
}

// Freeze holds every byte of the connections now through the relay,
// without a word to either end, as a link that died silently; new
// connections pass.
func (r *Relay) Freeze() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.conns {
		p.frozen = true
	}
}

// Pause holds the bytes from the target to the client, of every
// connection, until Resume: what the server says comes late.
func (r *Relay) Pause() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.back == nil {
		r.back = make(chan struct{})
	}
}

// Resume lets the bytes Pause held through, in order.
func (r *Relay) Resume() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.back != nil {
		close(r.back)
		r.back = nil
	}
}

// Retarget sends new connections to addr: the path now leads elsewhere
// (another machine answering at the same address).
func (r *Relay) Retarget(addr string) {
	r.mu.Lock()
	r.target = addr
	r.mu.Unlock()
}

// Restore lets new connections through again.
func (r *Relay) Restore() {
	r.mu.Lock()
	r.down = false
	r.mu.Unlock()
}

// Close ends the relay and every connection.
func (r *Relay) Close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	r.mu.Unlock()
	r.ln.Close()
	r.Drop()
	r.wg.Wait()
}
