package lazyre

import "testing"

func TestLazy(t *testing.T) {
	r := New(`^a(\d+)$`)
	if !r.MatchString("a12") || r.MatchString("b") {
		t.Fatal("MatchString")
	}
	if m := r.FindStringSubmatch("a7"); len(m) != 2 || m[1] != "7" {
		t.Fatalf("FindStringSubmatch: %q", m)
	}
	if got := New(`x`).ReplaceAllString("axbx", "_"); got != "a_b_" {
		t.Fatalf("ReplaceAllString: %q", got)
	}
	bad := New(`(`)
	defer func() {
		if recover() == nil {
			t.Fatal("a bad pattern did not panic at first use")
		}
	}()
	bad.MatchString("")
}
