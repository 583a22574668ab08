// Package procstat tells whether a process runs, and when it has exited,
// from /proc (kill(pid, 0) where there is none).
//
// The two differ for a process of many threads: once killed, or once it
// calls exit, its first thread can be a zombie while the others still
// exit, and until the last of them has, its files (a listening socket, a
// connection) stay open. Running is false from the start of that; Exited
// is true only at its end.
package procstat

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
)

// Stat reads a process's state letter and start time (in clock ticks
// since boot) from /proc/PID/stat; ok is false without it.
func Stat(pid int) (state byte, start string, ok bool) {
	f, ok := Fields(pid)
	if !ok || len(f) < 20 {
		return 0, "", false
	}
	return f[0][0], f[19], true // fields 3 and 22
}

// Fields reads /proc/PID/stat's fields from the third on, those after the
// command's name: f[0] is the state, f[11] and f[12] the user and system
// CPU time in clock ticks (proc(5)'s fields 14 and 15); ok is false
// without them.
func Fields(pid int) (f []string, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, false
	}
	// The command name, in parentheses, may hold spaces and parentheses:
	// the fields follow the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return nil, false
	}
	f = strings.Fields(string(b[i+1:]))
	return f, len(f) > 0
}

// Running reports whether pid runs and is not exiting; where start is
// not "", it must also be the process started then (as Stat gives it),
// not a later one that reuses the pid.
func Running(pid int, start string) bool {
	if pid <= 0 {
		return false
	}
	if state, st, ok := Stat(pid); ok {
		return !ended(state) && (start == "" || st == start)
	}
	return signalable(pid)
}

// Exited reports whether pid has ended with all its threads, and with
// them its open files; where start is not "", a later process that
// reuses the pid does not hold it up. A zombie that waits to be reaped
// has ended, except where there is no /proc (it counts until reaped).
func Exited(pid int, start string) bool {
	state, st, ok := Stat(pid)
	if !ok {
		return !signalable(pid)
	}
	if start != "" && st != start {
		return true
	}
	if !ended(state) {
		return false
	}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	return err != nil || len(tasks) <= 1
}

func ended(state byte) bool { return state == 'Z' || state == 'X' }

func signalable(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
