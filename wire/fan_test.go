package wire

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func hostOK(host, out, value string, cell int) HostResult {
	return HostResult{Host: host, Result: &Result{Session: "p@" + host, Cell: cell, Status: StatusOK, Output: out, Value: &value}}
}

func TestFanText(t *testing.T) {
	r := &Result{Session: "p", Fan: []HostResult{
		hostOK("lab-1", "hi\n", "'6.1'", 2),
		hostOK("lab-2", "hi\n", "'6.1'", 2),
		hostOK("lab-3", "hi\n", "'6.1'", 2),
		hostOK("lab-10", "", "'5.4'", 2),
		{Host: "lab-4", Result: &Result{Session: "p@lab-4", Cell: 2, Status: StatusError,
			Error: &CellError{Type: "ZeroDivisionError", Message: "division by zero", Traceback: "Traceback (most recent call last):\nZeroDivisionError: division by zero\n"}}},
		{Host: "lab-5", Result: &Result{Session: "p@lab-5", Cell: 2, Status: StatusRunning, DurationMS: 30000}},
		{Host: "lab-31", Result: &Result{Session: "p@lab-31", Status: StatusFailed}, Failure: "session 'p@lab-31' did not start: remote: lab-31: connection refused\nmore"},
		{Host: "lab-32", Result: &Result{Session: "p@lab-32", Status: StatusFailed}, Failure: "session 'p@lab-32' did not start: remote: connection refused"},
		{Host: "lab-33", Result: &Result{Session: "p@lab-33", Status: StatusFailed}, Failure: "session 'p@lab-33' did not start: remote: connection refused"},
	}}
	r.Status = Worst(r.Fan)
	assert.Equal(t, StatusFailed, r.Status)
	want := `[group 'p' on 9 hosts: 4 ok, 1 raised, 1 still running, 3 could not run]
---------------
lab-[1-3] (3)
---------------
hi
Out[2]: '6.1'
---------------
lab-10 (1)
---------------
Out[2]: '5.4'
---------------
lab-4 (1)
---------------
Traceback (most recent call last):
ZeroDivisionError: division by zero
---------------
lab-5 (1)
---------------
[still running after 30s; it goes on: ` + "`replhub wait p`" + ` collects it]
failed on 5 of 9 hosts:
  lab-4: raised ZeroDivisionError: division by zero
  lab-5: timed out: the cell still runs (` + "`replhub wait p`" + ` collects it)
  lab-31: could not run: remote: lab-31: connection refused ...
  lab-[32-33]: could not run: remote: connection refused
`
	assert.Equal(t, want, r.Text())

	// Cells of other numbers with the same value share a block without one.
	r = &Result{Session: "p", Fan: []HostResult{hostOK("a1", "", "1", 3), hostOK("a2", "", "1", 4)}}
	assert.Contains(t, r.TextFor(SurfaceMCP), "a[1-2] (2)\n---------------\nOut: 1\n")
	assert.Equal(t, StatusOK, Worst(r.Fan))
	dead := []HostResult{{Host: "x", Result: &Result{Status: StatusDead}}, {Host: "y", Result: &Result{Status: StatusFailed}}}
	assert.Equal(t, StatusDead, Worst(dead))
}

func TestFanTextGroupCell(t *testing.T) {
	r := &Result{Session: "p", Cell: 5, Fan: []HostResult{
		hostOK("a1", "", "1", 5), hostOK("a2", "", "1", 6), hostOK("a3", "", "1", 6), hostOK("a4", "", "1", 2),
		{Host: "a5", Result: &Result{Session: "p@a5", Status: StatusRunning, DurationMS: 3000}, Connecting: true},
	}}
	r.Status = Worst(r.Fan)
	assert.Equal(t, StatusRunning, r.Status, "a host still connecting is pending, as a running cell")
	text := r.Text()
	assert.Contains(t, text, "[group 'p' on 5 hosts: 4 ok, 1 still connecting]\n[group cell 5 is cell 2 on a4, cell 6 on a[2-3]]\n")
	assert.Contains(t, text, "a[1-4] (4)\n---------------\nOut: 1\n")
	assert.Contains(t, text, "failed on 1 of 5 hosts:\n  a5: still connecting: the start goes on")
	assert.NotContains(t, text, "a5 (1)", "a host with no session yet has no block")

	// Where every host numbers it as the group does, nothing is said.
	r = &Result{Session: "p", Cell: 3, Fan: []HostResult{hostOK("a1", "", "1", 3), hostOK("a2", "", "1", 3)}}
	assert.NotContains(t, r.Text(), "group cell")
}
