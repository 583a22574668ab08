package hub

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/replhub/replhub/tests/pyenvtest"
	"github.com/replhub/replhub/wire"
)

// A new local session runs --python, else $REPLHUB_PYTHON, else the
// activated conda env's python3, else the first python3 on PATH, else a
// conda install's; none of them is run to choose.
func TestChoosePythonConda(t *testing.T) {
	home := t.TempDir()
	ran := filepath.Join(home, "runs")
	pyenvtest.Conda(t, filepath.Join(home, "miniconda3"), "3.11.4", "/bin/false", ran)
	pyenvtest.Conda(t, filepath.Join(home, "env"), "3.12.1", "/bin/false", ran)
	sys := filepath.Join(home, "sys", "python3")
	os.Mkdir(filepath.Dir(sys), 0o755)
	os.Symlink("/bin/false", sys)
	py := func(pre string) string { return filepath.Join(home, pre, "bin", "python3") }
	for _, c := range []struct {
		name string
		env  []string
		want string
	}{
		{"PATH", []string{"PATH=" + filepath.Dir(sys)}, sys},
		{"PATH before the activated env", []string{"PATH=" + filepath.Dir(sys), "CONDA_PREFIX=" + filepath.Join(home, "env")}, sys},
		{"the activated env when PATH has none", []string{"PATH=/nonexistent", "CONDA_PREFIX=" + filepath.Join(home, "env")}, py("env")},
		{"REPLHUB_PYTHON before it", []string{"PATH=/nonexistent", "CONDA_PREFIX=" + filepath.Join(home, "env"), "REPLHUB_PYTHON=" + sys}, sys},
		{"an install when PATH has none", []string{"PATH=/nonexistent"}, py("miniconda3")},
	} {
		got, err := choosePython(wire.Request{Env: append([]string{"HOME=" + home}, c.env...), Cwd: home})
		if err != nil || got.Path != c.want {
			t.Errorf("%s: %+v, %v; want %s", c.name, got, err, c.want)
		}
	}
	if _, err := choosePython(wire.Request{Env: []string{"HOME=" + filepath.Join(home, "sys"), "PATH=/nonexistent"}}); err == nil {
		t.Error("no python3 anywhere must fail")
	}
	if b, _ := os.ReadFile(ran); len(b) != 0 {
		t.Errorf("ran %s", b)
	}
}
