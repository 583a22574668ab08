package hub

import (
	"fmt"
	"os"
	"path/filepath"
)

// Sink writes a file on this machine whole or not at all, for a client's
// pull: NAME.replhub-part (0600) beside it, fsynced, renamed into place, the
// folder fsynced. Overwriting keeps the destination's mode; a new file takes
// the source's.
type Sink struct {
	target string
	part   string
	mode   os.FileMode
	f      *os.File
}

// NewSink starts writing dest; a symlink dest stays a link to the file it
// names, which is replaced.
func NewSink(dest string, mode os.FileMode) (*Sink, error) {
	abs, err := filepath.Abs(dest)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(abs); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("%s is a folder: give the file's own path", dest)
	}
	target := abs
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		target = real
	}
	s := &Sink{target: target, part: target + ".replhub-part", mode: mode}
	s.f, err = os.OpenFile(s.part, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	s.f.Chmod(0o600)
	return s, nil
}

// Write appends p.
func (s *Sink) Write(p []byte) error {
	_, err := s.f.Write(p)
	return err
}

// Finish puts the file in place.
func (s *Sink) Finish() error {
	if err := s.f.Sync(); err != nil {
		s.Abort()
		return err
	}
	mode := s.mode.Perm()
	if fi, err := os.Stat(s.target); err == nil {
		mode = fi.Mode().Perm()
	}
	if mode == 0 {
		mode = 0o600
	}
	s.f.Chmod(mode)
	if err := s.f.Close(); err != nil {
		os.Remove(s.part)
		return err
	}
	if err := os.Rename(s.part, s.target); err != nil {
		os.Remove(s.part)
		return err
	}
	if d, err := os.Open(filepath.Dir(s.target)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// Abort removes the partial file.
func (s *Sink) Abort() {
	s.f.Close()
	os.Remove(s.part)
}
