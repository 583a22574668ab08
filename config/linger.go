package config

import (
	"fmt"
	"math"
	"time"
)

// "linger" (config.json, top level or per host pattern): how long, in
// minutes, a remote session's worker waits on its host for the hub to
// come back after the link drops. Unset means 10; 0 turns it off (the
// worker ends with its link). Fractions are allowed: 0.5 is 30 seconds.
const (
	DefaultLingerMinutes = 10
	maxLingerMinutes     = 7 * 24 * 60 // a week
)

func checkLinger(v *float64, name, field string) error {
	if v != nil && (*v < 0 || *v > maxLingerMinutes || math.IsNaN(*v)) {
		return fmt.Errorf("config: %s: %s must be a number of minutes from 0 (off) to %d", name, field, maxLingerMinutes)
	}
	return nil
}

// LingerFor is how long a worker on a host with these settings lingers;
// zero means it does not.
func (s Settings) LingerFor() time.Duration {
	m := float64(DefaultLingerMinutes)
	if s.Linger != nil {
		m = *s.Linger
	}
	return time.Duration(m * float64(time.Minute))
}
