package main

import (
	"fmt"
	"os"
	"os/exec"
	"time"
)

// terminal is a pseudo-terminal whose other end is read and dropped, as
// a terminal shows what is written to it.
type terminal struct {
	master, slave *os.File
}

func (y *terminal) close() {
	y.slave.Close()
	y.master.Close()
}

// timeOn runs argv in w's environment with standard output and standard
// error on the terminal, and returns how long it took.
func (y *terminal) timeOn(w *world, argv ...string) (time.Duration, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Dir = w.env, w.cwd
	cmd.Stdout, cmd.Stderr = y.slave, y.slave
	t0 := time.Now()
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("%v on a terminal: %v", argv, err)
	}
	return time.Since(t0), nil
}

// pairOn is pair with both commands' output on the terminal.
func (y *terminal) pairOn(w *world, n int, a, b []string) (time.Duration, time.Duration, error) {
	return inTurn(n, a, b, func(argv []string) (time.Duration, error) { return y.timeOn(w, argv...) })
}
