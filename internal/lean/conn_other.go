//go:build !linux

package lean

import "time"

// Supported says whether Dial can check its peer on this system.
const Supported = false

// Dial is ErrUnsupported here: package early leaves the call to the
// client, whose safesock checks the peer.
func Dial(path string) (*Conn, error) { return nil, ErrUnsupported }

// IsTerminal reports true here, which makes package early leave the call
// to the client.
func IsTerminal(fd int) bool { return true }

// Readable reports true here (Dial makes no Conn here).
func (c *Conn) Readable(d time.Duration) bool { return true }
