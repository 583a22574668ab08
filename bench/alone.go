package main

import "flag"

// alone is a measurement that runs by itself: `-NAME` runs its rows and
// none of the default ones (no remote rows either).
type alone struct {
	on   *bool
	rows func(w *world, n int) ([]row, error)
}

var alones []alone

// measureAlone registers a measurement that `-name` runs alone; each
// bench file registers its own from init.
func measureAlone(name, usage string, rows func(w *world, n int) ([]row, error)) {
	alones = append(alones, alone{flag.Bool(name, false, usage), rows})
}

// pickedAlone returns the measurements asked for on the command line.
func pickedAlone() []alone {
	var picked []alone
	for _, a := range alones {
		if *a.on {
			picked = append(picked, a)
		}
	}
	return picked
}

func init() {
	measureAlone("swap", "measure only swap and restore of a 100 MB namespace",
		func(w *world, _ int) ([]row, error) { return swapRows(w, 5) })
	measureAlone("durable", "measure only the adoption of live sessions by a new hub",
		func(w *world, _ int) ([]row, error) { return durableRows(w) })
	measureAlone("linger", "measure only a remote session's reattach after its link drops",
		func(w *world, n int) ([]row, error) { return lingerRows(w, min(n, 10)) })
	measureAlone("toolkit", "measure only the toolkit: grep against rg, edit of a 10 MB file",
		func(w *world, n int) ([]row, error) { return toolkitRows(w, min(n, 7)) })
}
