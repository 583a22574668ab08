package fds

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// inheritablePipe makes a pipe whose fds are not close-on-exec, as one a
// process inherited would be.
func inheritablePipe(t *testing.T) [2]int {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(p[0]); unix.Close(p[1]) })
	return p
}

// childSees reports whether a child started now has fd open.
func childSees(t *testing.T, fd int) bool {
	t.Helper()
	err := exec.Command("sh", "-c", fmt.Sprintf("[ -e /proc/$$/fd/%d ]", fd)).Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return err == nil
}

func TestMarkCloseOnExec(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("needs /proc")
	}
	p := inheritablePipe(t)
	own, err := os.Open(os.DevNull) // close-on-exec, as Go opens everything
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	inh := Inherited()
	if !slices.Contains(inh, p[0]) || !slices.Contains(inh, p[1]) {
		t.Fatalf("Inherited() = %v, want the pipe %v among them", inh, p)
	}
	if slices.Contains(inh, int(own.Fd())) {
		t.Fatalf("Inherited() = %v lists a close-on-exec fd %d", inh, own.Fd())
	}
	if !childSees(t, p[1]) {
		t.Fatal("a child does not see the inheritable fd: the check is broken")
	}
	undo := MarkCloseOnExec()
	if childSees(t, p[1]) {
		t.Error("a child started after MarkCloseOnExec holds the pipe")
	}
	undo()
	if !childSees(t, p[1]) {
		t.Error("after undo, the fd is not inheritable again")
	}
}

// TestCloseInherited runs in a child started with an inheritable pipe as
// fd 3, so that this process's own fds are left alone.
func TestCloseInherited(t *testing.T) {
	if os.Getenv("FDS_TEST_CHILD") == "1" {
		closed := CloseInherited()
		_, err := unix.FcntlInt(3, unix.F_GETFD, 0)
		fmt.Printf("closed %v; fd 3: %v\n", closed, err)
		os.Exit(0)
	}
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("needs /proc")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCloseInherited$")
	cmd.Env = append(os.Environ(), "FDS_TEST_CHILD=1")
	cmd.ExtraFiles = []*os.File{w}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	line := strings.TrimSpace(string(out))
	// The test process may itself have inherited fds beyond 3; they go too.
	if !strings.HasPrefix(line, "closed [3") || !strings.HasSuffix(line, "fd 3: "+syscall.EBADF.Error()) {
		t.Errorf("child said %q, want fd 3 closed", line)
	}
}
