package hubtest

import (
	"bytes"
	"sync"
)

// LockedBuffer is a bytes.Buffer that a test shares with goroutines (a
// worker's output reader, a signal handler) writing to it.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
