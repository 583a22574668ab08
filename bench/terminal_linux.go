package main

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// newTerminal opens a pseudo-terminal pair (/dev/ptmx) and starts
// draining it.
func newTerminal() (*terminal, error) {
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	fd := int(m.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		return nil, err
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		m.Close()
		return nil, err
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		return nil, err
	}
	go io.Copy(io.Discard, m) // ends when the master closes
	return &terminal{master: m, slave: s}, nil
}
