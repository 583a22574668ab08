package config

import (
	"fmt"
	"math"
	"time"
)

// Swap settings (config.json, top level):
//
//   - "swap_after_hours": a session nobody has used for this long is
//     swapped to disk by the hub's sweep (every 10 minutes). Unset means 24;
//     0 turns swapping off, at a graceful stop too (`replhub swap` still
//     swaps on request). Fractions are allowed: 0.5 is half an hour.
//   - "swap_keep_days": a swap not restored within this long is deleted,
//     leaving a death note. Unset means 7; 0 keeps swaps until they are
//     restored or killed.
const (
	DefaultSwapAfterHours = 24
	DefaultSwapKeepDays   = 7
	// maxSwapHours bounds both settings (a century), so that a duration
	// cannot overflow.
	maxSwapHours = 100 * 365 * 24
)

func (f *File) checkSwap(name string) error {
	if v := f.SwapAfterHours; v != nil && (*v < 0 || *v > maxSwapHours || math.IsNaN(*v)) {
		return fmt.Errorf("config: %s: swap_after_hours must be a number of hours from 0 (off) to %d", name, maxSwapHours)
	}
	if v := f.SwapKeepDays; v != nil && (*v < 0 || *v > maxSwapHours/24 || math.IsNaN(*v)) {
		return fmt.Errorf("config: %s: swap_keep_days must be a number of days from 0 (keep) to %d", name, maxSwapHours/24)
	}
	return nil
}

// SwapAfter is how long a session must be idle before the sweep swaps it;
// zero means swapping is off.
func (f *File) SwapAfter() time.Duration {
	h := float64(DefaultSwapAfterHours)
	if f.SwapAfterHours != nil {
		h = *f.SwapAfterHours
	}
	return time.Duration(h * float64(time.Hour))
}

// SwapKeep is how long a swap is kept unrestored; zero means for ever.
func (f *File) SwapKeep() time.Duration {
	d := float64(DefaultSwapKeepDays)
	if f.SwapKeepDays != nil {
		d = *f.SwapKeepDays
	}
	return time.Duration(d * 24 * float64(time.Hour))
}
