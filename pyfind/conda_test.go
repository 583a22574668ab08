package pyfind

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/replhub/replhub/tests/pyenvtest"
)

// condaHome makes a home with conda installs and envs whose python3 notes
// each run in the file it returns and answers 3.10 when asked: a version
// read from conda-meta is told apart from one asked.
func condaHome(t *testing.T) (home, ran string) {
	home = t.TempDir()
	ran = filepath.Join(home, "runs")
	answer := filepath.Join(home, "answer")
	os.WriteFile(answer, []byte("#!/bin/sh\nprintf '3.10\\n\\n'\n"), 0o755)
	for pre, v := range map[string]string{
		"miniconda3":              "3.11.4",
		"miniconda3/envs/ml":      "3.12.1",
		"miniconda3/envs/bare":    "",
		"miniforge3/envs/old":     "3.9.18",
		"mamba/envs/tiny":         "3.13.0",
		"elsewhere/proj":          "3.12.8",
		"anaconda3/envs/nopython": "",
	} {
		pyenvtest.Conda(t, filepath.Join(home, pre), v, answer, ran)
	}
	os.Remove(filepath.Join(home, "anaconda3/envs/nopython/bin/python3"))
	os.MkdirAll(filepath.Join(home, ".conda"), 0o755)
	os.WriteFile(filepath.Join(home, ".conda", "environments.txt"), []byte(strings.Join([]string{
		filepath.Join(home, "miniconda3"), filepath.Join(home, "elsewhere/proj"), "relative/env", ""}, "\n")), 0o644)
	return home, ran
}

func TestCondaMinorIsRead(t *testing.T) {
	home, ran := condaHome(t)
	py := func(pre string) string { return filepath.Join(home, pre, "bin", "python3") }
	link := filepath.Join(home, "bin", "python3")
	os.MkdirAll(filepath.Dir(link), 0o755)
	os.Symlink(py("miniconda3/envs/ml"), link)
	file := filepath.Join(home, "pythons.json")
	for i := 0; i < 3; i++ {
		c := &Cache{File: file}
		for p, want := range map[string]string{
			py("miniconda3"):           "3.11",
			py("miniconda3/envs/ml"):   "3.12",
			link:                       "3.12",
			py("mamba/envs/tiny"):      "3.13",
			py("miniconda3/envs/bare"): "3.10",
		} {
			if got := c.Minor(p); got != want {
				t.Fatalf("Minor(%s) = %q, want %q", p, got, want)
			}
		}
	}
	b, _ := os.ReadFile(ran)
	if string(b) != py("miniconda3/envs/bare")+"\n" {
		t.Fatalf("runs: %q; want only the env without conda-meta, once", b)
	}
}

func TestCondaPythons(t *testing.T) {
	home, ran := condaHome(t)
	py := func(pre string) string { return filepath.Join(home, pre, "bin", "python3") }
	env := map[string]string{"HOME": home, "MAMBA_ROOT_PREFIX": filepath.Join(home, "mamba")}
	want := []string{py("miniconda3"), py("miniconda3/envs/bare"), py("miniconda3/envs/ml"),
		py("miniforge3/envs/old"), py("mamba/envs/tiny"), py("elsewhere/proj")}
	if got := CondaPythons(envOf(env)); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("CondaPythons:\n got %q\nwant %q", got, want)
	}
	env["CONDA_PREFIX"] = filepath.Join(home, "elsewhere/proj")
	got := CondaPythons(envOf(env))
	if got[0] != py("elsewhere/proj") || len(got) != len(want) {
		t.Fatalf("the activated env comes first, once: %q", got)
	}
	env["CONDA_PREFIX"] = filepath.Join(home, "anaconda3/envs/nopython")
	if got := CondaPythons(envOf(env)); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("an activated env without a Python is not listed: %q", got)
	}
	if got := CondaPythons(envOf(map[string]string{"HOME": "relative"})); len(got) != 0 {
		t.Fatalf("a relative HOME lists nothing: %q", got)
	}
	if b, _ := os.ReadFile(ran); len(b) != 0 {
		t.Fatalf("listing ran %s", b)
	}
}

var validMinorRe = regexp.MustCompile(`^3\.[0-9]{1,2}$`)

func FuzzCondaMetaVersion(f *testing.F) {
	for _, s := range []string{"python-3.12.1-hd12c33a_0_cpython.json", "python-3.9.18-h0755675_0.json", "python-3.13.0-h9ebbce0_100_cp313t.json",
		"python-dateutil-2.9.0-pyhd8ed1ab_0.json", "python_abi-3.12-5_cp312.json", "python-3.12.1.json", "python-3.12.1-.json", "python-3.100.0-x.json", "history"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m := condaMetaMinor(s)
		if m == "" {
			return
		}
		if !validMinorRe.MatchString(m) || !strings.HasPrefix(s, "python-"+m) || strings.Count(s, "-") != 2 || !strings.HasSuffix(s, ".json") {
			t.Fatalf("condaMetaMinor(%q) = %q", s, m)
		}
	})
}

// Only the interpreter's own names take the prefix's record: a
// python3-config or pip beside it is not a Python of that version.
func TestCondaMinorIsTheInterpretersOnly(t *testing.T) {
	home, _ := condaHome(t)
	bin := filepath.Join(home, "miniconda3", "bin")
	for name, want := range map[string]string{"python3": "3.11", "python": "3.11", "python3-config": "", "pip": ""} {
		if got := condaMinor(filepath.Join(bin, name)); got != want {
			t.Errorf("condaMinor(%s) = %q, want %q", name, got, want)
		}
	}
}
