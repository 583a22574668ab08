//go:build !linux

package main

import "errors"

// newTerminal is Linux's alone here.
func newTerminal() (*terminal, error) {
	return nil, errors.New("bench: no pseudo-terminal on this system")
}
