package early

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"

	"github.com/replhub/replhub/client"
	"github.com/replhub/replhub/hub"
	"github.com/replhub/replhub/internal/lean"
	"github.com/replhub/replhub/wire"
)

func TestPlainExec(t *testing.T) {
	for _, tc := range []struct {
		args []string
		ok   bool
		want Call // Name and Code are args[1] and args[2], or as given
	}{
		{[]string{"exec", "s", "1+1"}, true, Call{Timeout: 30}},
		{[]string{"exec", "lab@gw", "print('-t')"}, true, Call{Timeout: 30}},
		{[]string{"exec", "s", "-"}, true, Call{Timeout: 30}}, // stdin
		{[]string{"exec", "s", "x", "-t", "5"}, true, Call{Timeout: 5}},
		{[]string{"exec", "-t5", "s", "x"}, true, Call{Name: "s", Code: "x", Timeout: 5}},
		{[]string{"exec", "s", "-t=0.5", "x"}, true, Call{Name: "s", Code: "x", Timeout: 0.5}},
		{[]string{"exec", "s", "x", "--timeout", "600"}, true, Call{Timeout: 600}},
		{[]string{"exec", "--timeout=120", "s", "-"}, true, Call{Name: "s", Code: "-", Timeout: 120}},
		{[]string{"exec", "s", "x", "-t", "5", "-t", "7"}, true, Call{Timeout: 7}}, // the last counts
		{[]string{"exec", "s", "x", "-t", "1e2"}, true, Call{Timeout: 100}},
		{[]string{"exec", "s", "x", "-t700", "-t5"}, true, Call{Timeout: 5}}, // checked once, as cobra does
		{[]string{"exec", "s", "x", "-t", "1e-10"}, true, Call{}},            // 0: the hub's default, as the client sends it
		{[]string{"exec", "s", "x", "-test.v"}, false, Call{}},               // pflag skips go test's flags; cobra runs it
		{[]string{"exec", "s", "x", "--json"}, true, Call{Timeout: 30, JSON: true}},
		{[]string{"exec", "--json", "s", "x", "-t", "9"}, true, Call{Name: "s", Code: "x", Timeout: 9, JSON: true}},
		{[]string{"exec", "s", "x", "--json=false"}, true, Call{Timeout: 30}},
		{[]string{"exec", "s", "x", "--json=T", "--json=0", "--json"}, true, Call{Timeout: 30, JSON: true}},
		{[]string{"exec", "s", "x", "--json=maybe"}, false, Call{}},
		{[]string{"exec", "s", "x", "--json", "true"}, false, Call{}}, // a third word
		{[]string{"exec", "s", "x", "-t"}, false, Call{}},
		{[]string{"exec", "s", "x", "-t", "0"}, false, Call{}},
		{[]string{"exec", "s", "x", "-t", "601"}, false, Call{}},
		{[]string{"exec", "s", "x", "-t", "-5"}, false, Call{}},
		{[]string{"exec", "s", "x", "-t", "NaN"}, false, Call{}},
		{[]string{"exec", "s", "x", "-t="}, false, Call{}},
		{[]string{"exec", "s", "x", "--t", "5"}, false, Call{}},
		{[]string{"exec", "s", "x", "-t", "5", "extra"}, false, Call{}},
		{[]string{"exec", "s", "x", "--max-output", "50"}, true, Call{Timeout: 30, MaxOutput: 50}},
		{[]string{"exec", "--max-output=0x10", "s", "x"}, true, Call{Name: "s", Code: "x", Timeout: 30, MaxOutput: 16}},
		{[]string{"exec", "s", "x", "--max-output", "1_000", "--json"}, true, Call{Timeout: 30, MaxOutput: 1000, JSON: true}},
		{[]string{"exec", "s", "x", "--max-output", "0"}, true, Call{Timeout: 30}}, // the hub's default
		{[]string{"exec", "s", "x", "--max-output", "2000000"}, true, Call{Timeout: 30, MaxOutput: 2000000}},
		{[]string{"exec", "s", "x", "--max-output=3000000", "--max-output=7"}, true, Call{Timeout: 30, MaxOutput: 7}}, // checked once
		{[]string{"exec", "s", "x", "--max-output", "2000001"}, false, Call{}},
		{[]string{"exec", "s", "x", "--max-output", "-1"}, false, Call{}},
		{[]string{"exec", "s", "x", "--max-output", "5.0"}, false, Call{}},
		{[]string{"exec", "s", "x", "--max-output", "--json"}, false, Call{}}, // --json is its value
		{[]string{"exec", "s", "x", "--max-output"}, false, Call{}},
		{[]string{"exec", "s", "x", "--max-output="}, false, Call{}},
		{[]string{"exec", "s", "x", "--max-outputs=5"}, false, Call{}},
		{[]string{"exec", "s", "x", "--no-wait"}, true, Call{Timeout: 30, NoWait: true}},
		{[]string{"exec", "--queue", "s", "x", "--json"}, true, Call{Name: "s", Code: "x", Timeout: 30, Queue: true, JSON: true}},
		{[]string{"exec", "s", "x", "--queue=t", "--no-wait=0"}, true, Call{Timeout: 30, Queue: true}},
		{[]string{"exec", "s", "x", "--queue="}, false, Call{}},
		{[]string{"exec", "s", "x", "--no-wait=maybe"}, false, Call{}},
		{[]string{"exec", "s", "x", "--no-wait", "true"}, false, Call{}}, // a third word
		{[]string{"exec", "s", "x", "--python", "p"}, true, Call{Timeout: 30, Python: "p"}},
		{[]string{"exec", "--python=/usr/bin/python3", "s", "x", "--python="}, false, Call{}}, // the last counts: empty, package cli refuses it
		{[]string{"exec", "s", "x", "--host", "lab-7", "--json"}, true, Call{Timeout: 30, Host: "lab-7", JSON: true}},
		{[]string{"exec", "--host=me@lab:2222", "s", "x"}, true, Call{Name: "s", Code: "x", Timeout: 30, Host: "me@lab:2222"}},
		{[]string{"exec", "s", "x", "--host", "--json"}, true, Call{Timeout: 30, Host: "--json"}}, // --json is its value
		{[]string{"exec", "s", "x", "--host", "-"}, true, Call{Timeout: 30, Host: "-"}},
		{[]string{"exec", "s", "x", "--sudo"}, true, Call{Timeout: 30, Sudo: true}},
		{[]string{"exec", "s", "x", "--sudo=1", "--sudo=false"}, true, Call{Timeout: 30}},
		{[]string{"exec", "s", "x", "--sudo=root"}, false, Call{}},
		{[]string{"exec", "s", "x", "--host"}, false, Call{}},
		{[]string{"exec", "s", "x", "--python"}, false, Call{}},
		{[]string{"exec", "s", "x", "--jump", "gw"}, false, Call{}},
		{[]string{"exec", "s", "x", "--pythons", "3.12"}, false, Call{}},
		{[]string{"exec", "s", "x", "--hosts", "lab-[1-2]"}, false, Call{}},
		{[]string{"wait", "s", "--host", "lab"}, false, Call{}},
		{[]string{"exec", "s", "x", "--fanout", "4"}, false, Call{}},
		{[]string{"exec", "s", "x", "-tq"}, false, Call{}},
		{[]string{"exec", "-", "x"}, false, Call{}},
		{[]string{"exec", "s", "-1"}, false, Call{}}, // cobra reads it as a flag
		{[]string{"exec", "--", "s", "x"}, false, Call{}},
		{[]string{"exec", "s", ""}, false, Call{}},
		{[]string{"exec", "", "x"}, false, Call{}},
		{[]string{"exec", "s"}, false, Call{}},
		{[]string{"exec", "-t", "5", "s"}, false, Call{}},
		{[]string{"wait", "s", "x"}, false, Call{}},
		{[]string{"--version"}, false, Call{}},
		{nil, false, Call{}},
	} {
		c, ok := PlainExec(tc.args)
		assert.Equal(t, tc.ok, ok, "%q", tc.args)
		if ok {
			want := tc.want
			if want.Name == "" {
				want.Name, want.Code = tc.args[1], tc.args[2]
			}
			want.Op = opExec
			assert.Equal(t, want, c, "%q", tc.args)
		}
		if w, wok := cobraReads(tc.args); ok || !goTestFlag(tc.args) {
			assert.Equal(t, wok, ok, "%q: as cobra reads it", tc.args)
			assert.Equal(t, w, c, "%q: as cobra reads it", tc.args)
		}
	}
}

// A plain run: `run CODE` with exec's flags but --no-wait and --queue,
// read as cobra reads them; anything else (run's own --transcript,
// --jump, --pythons, an empty CODE, a second word) is cobra's.
func TestPlainRun(t *testing.T) {
	run := func(c Call) Call {
		c.Op, c.Private = opExec, true
		return c
	}
	for _, tc := range []struct {
		args []string
		ok   bool
		want Call
	}{
		{[]string{"run", "1+1"}, true, run(Call{Code: "1+1", Timeout: 30})},
		{[]string{"run", "-"}, true, run(Call{Code: "-", Timeout: 30})},
		{[]string{"run", "-t", "5", "x", "--json"}, true, run(Call{Code: "x", Timeout: 5, JSON: true})},
		{[]string{"run", "x", "--max-output=40", "--python", "/p", "--host=lab", "--sudo"}, true,
			run(Call{Code: "x", Timeout: 30, MaxOutput: 40, Python: "/p", Host: "lab", Sudo: true})},
		{[]string{"run", "--python", "--sudo", "x"}, true, run(Call{Code: "x", Timeout: 30, Python: "--sudo"})},
		{[]string{"run", ""}, false, Call{}},
		{[]string{"run"}, false, Call{}},
		{[]string{"run", "x", "y"}, false, Call{}},
		{[]string{"run", "x", "--no-wait"}, false, Call{}},
		{[]string{"run", "x", "--queue"}, false, Call{}},
		{[]string{"run", "x", "--transcript"}, false, Call{}},
		{[]string{"run", "x", "--jump", "gw"}, false, Call{}},
		{[]string{"run", "x", "--pythons", "p"}, false, Call{}},
		{[]string{"run", "--", "x"}, false, Call{}},
		{[]string{"run", "x", "-t", "0"}, false, Call{}},
	} {
		readsAsCobra(t, tc.args, tc.ok, tc.want)
	}
}

// readsAsCobra checks that PlainCall reads args as want (ok: takes them at
// all), and as cobra reads them.
func readsAsCobra(t *testing.T, args []string, ok bool, want Call) {
	t.Helper()
	c, took := PlainCall(args)
	assert.Equal(t, ok, took, "%q", args)
	assert.Equal(t, want, c, "%q", args)
	w, wok := cobraReads(args)
	assert.Equal(t, wok, took, "%q: as cobra reads it", args)
	assert.Equal(t, w, c, "%q: as cobra reads it", args)
}

// goTestFlag reports whether an argument starts with -test., which pflag
// skips (go test's flags) and PlainExec leaves to cobra.
func goTestFlag(args []string) bool {
	for _, a := range args {
		if strings.HasPrefix(a, "-test.") {
			return true
		}
	}
	return false
}

func TestIsVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"-v"}} {
		assert.True(t, IsVersion(args), "%q", args)
	}
	for _, args := range [][]string{nil, {}, {"--version", "x"}, {"-v", "exec"}, {"--version=true"}, {"version"}, {"-V"}, {"exec", "--version"}} {
		assert.False(t, IsVersion(args), "%q", args)
	}
}

// cobraReads is how package cli's exec, wait, sessions, interrupt or kill
// reads args (pflag: sessions has --json alone, interrupt --cell alone
// (from 1, when given), kill none; the others -t, --json and
// --max-output, exec --no-wait, --queue, --python, --host and --sudo, and
// wait --cell), and whether
// early is
// to take them: two words for exec (NAME not -), one for wait, neither
// empty, no `--`, seconds and a cap that cli's checks take, and a cell
// from 0 (the hub refuses others; early leaves them to cli, which says
// so); the seconds as its client sends them (through a time.Duration).
func cobraReads(args []string) (Call, bool) {
	if len(args) > 0 && (args[0] == opVars || args[0] == opInspect || args[0] == opComplete || args[0] == opReset) {
		return cobraReadsQuery(args)
	}
	if len(args) == 0 || (args[0] != opExec && args[0] != opRun && args[0] != opWait && args[0] != opSessions && args[0] != opInterrupt && args[0] != opKill) {
		return Call{}, false
	}
	fs := pflag.NewFlagSet(args[0], pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if args[0] == opInterrupt || args[0] == opKill {
		cell := new(int)
		if args[0] == opInterrupt {
			cell = fs.Int("cell", 0, "")
		}
		if fs.Parse(args[1:]) != nil || fs.ArgsLenAtDash() >= 0 || fs.NArg() != 1 || fs.Arg(0) == "" || fs.Arg(0) == "-" ||
			fs.Changed("cell") && *cell < 1 {
			return Call{}, false
		}
		return Call{Op: args[0], Name: fs.Arg(0), Cell: *cell}, true
	}
	if args[0] == opSessions {
		asJSON := fs.Bool("json", false, "")
		if fs.Parse(args[1:]) != nil || fs.ArgsLenAtDash() >= 0 || fs.NArg() > 1 || fs.NArg() == 1 && (fs.Arg(0) == "" || fs.Arg(0) == "-") {
			return Call{}, false
		}
		return Call{Op: opSessions, Name: fs.Arg(0), JSON: *asJSON}, true
	}
	timeout := fs.Float64P("timeout", "t", 30, "")
	asJSON := fs.Bool("json", false, "")
	maxOutput := fs.Int("max-output", 0, "")
	cell, words := new(int), 2
	noWait, queue, sudo := new(bool), new(bool), new(bool)
	python, host := new(string), new(string)
	switch args[0] {
	case opWait:
		cell, words = fs.Int("cell", 0, ""), 1
	case opRun:
		words = 1
		sudo, python, host = fs.Bool("sudo", false, ""), fs.String("python", "", ""), fs.String("host", "", "")
	default:
		noWait, queue, sudo = fs.Bool("no-wait", false, ""), fs.Bool("queue", false, ""), fs.Bool("sudo", false, "")
		python, host = fs.String("python", "", ""), fs.String("host", "", "")
	}
	if fs.Parse(args[1:]) != nil || fs.ArgsLenAtDash() >= 0 {
		return Call{}, false
	}
	if fs.Changed("python") && *python == "" || fs.Changed("host") && *host == "" {
		return Call{}, false // package cli refuses them (noEmptyPlace)
	}
	w := fs.Args()
	if args[0] == opRun {
		// A run's one word is its code, which may be -.
		if len(w) != 1 || w[0] == "" || !(*timeout > 0 && *timeout <= 600) || *maxOutput < 0 || *maxOutput > hub.MaxReplyCap {
			return Call{}, false
		}
		return Call{Op: opExec, Private: true, Code: w[0], Timeout: time.Duration(*timeout * float64(time.Second)).Seconds(),
			JSON: *asJSON, MaxOutput: *maxOutput, Python: *python, Host: *host, Sudo: *sudo}, true
	}
	if len(w) != words || w[0] == "" || w[0] == "-" || w[words-1] == "" || !(*timeout > 0 && *timeout <= 600) ||
		*maxOutput < 0 || *maxOutput > hub.MaxReplyCap || fs.Changed("cell") && *cell < 1 {
		return Call{}, false
	}
	c := Call{Op: args[0], Name: w[0], Timeout: time.Duration(*timeout * float64(time.Second)).Seconds(), JSON: *asJSON,
		MaxOutput: *maxOutput, Cell: *cell, NoWait: *noWait, Queue: *queue, Python: *python, Host: *host, Sudo: *sudo}
	if words == 2 {
		c.Code = w[1]
	}
	return c, true
}

// cobraReadsQuery is cobraReads for the queries, as package cli's vars,
// inspect, complete and reset take them (--json; --wait but on a reset,
// between 0 and 600; --limit from 0 on vars and complete; --all on vars;
// --keep-imports on reset), and as client.QueryOptions sends --wait
// (0: -1, not to wait; through a time.Duration); early takes a name that
// is not empty nor -, and an inspect's expression that is not empty.
func cobraReadsQuery(args []string) (Call, bool) {
	op := args[0]
	fs := pflag.NewFlagSet(op, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "")
	wait, limit := new(float64), new(int)
	all, keep := new(bool), new(bool)
	if op != opReset {
		wait = fs.Float64("wait", 2, "")
	}
	if op == opVars || op == opComplete {
		limit = fs.Int("limit", 0, "")
	}
	if op == opVars {
		all = fs.Bool("all", false, "")
	}
	if op == opReset {
		keep = fs.Bool("keep-imports", false, "")
	}
	words := 1
	if op == opInspect || op == opComplete {
		words = 2
	}
	if fs.Parse(args[1:]) != nil || fs.ArgsLenAtDash() >= 0 || fs.NArg() != words || fs.Arg(0) == "" || fs.Arg(0) == "-" ||
		op == opInspect && fs.Arg(1) == "" || *wait < 0 || *wait > 600 || *wait != *wait || *limit < 0 {
		return Call{}, false
	}
	c := Call{Op: op, Name: fs.Arg(0), JSON: *asJSON, Limit: *limit, All: *all, KeepImports: *keep}
	if op != opReset {
		q := client.QueryOptions{Wait: time.Duration(*wait * float64(time.Second))}
		if *wait == 0 {
			q.Wait = -1
		}
		c.Wait = sentWait(q)
	}
	switch op {
	case opInspect:
		c.Expr = fs.Arg(1)
	case opComplete:
		c.Text = fs.Arg(1)
	}
	return c, true
}

// sentWait is the wait a client sends for q (client.QueryOptions'
// request).
func sentWait(q client.QueryOptions) float64 {
	switch {
	case q.Wait < 0:
		return -1
	case q.Wait > 0:
		return q.Wait.Seconds()
	}
	return 0
}

func TestPlainQuery(t *testing.T) {
	for _, tc := range []struct {
		args []string
		ok   bool
		want Call
	}{
		{[]string{"vars", "s"}, true, Call{Op: "vars", Name: "s", Wait: 2}},
		{[]string{"vars", "s", "--all", "--limit", "5", "--json"}, true, Call{Op: "vars", Name: "s", Wait: 2, All: true, Limit: 5, JSON: true}},
		{[]string{"vars", "--wait=0", "s"}, true, Call{Op: "vars", Name: "s", Wait: -1}},
		{[]string{"vars", "s", "--wait", "1e-10"}, true, Call{Op: "vars", Name: "s"}}, // under a nanosecond: the hub's default
		{[]string{"vars", "s", "--wait", "600", "--limit=0x10"}, true, Call{Op: "vars", Name: "s", Wait: 600, Limit: 16}},
		{[]string{"inspect", "s", "json.dumps"}, true, Call{Op: "inspect", Name: "s", Wait: 2, Expr: "json.dumps"}},
		{[]string{"inspect", "s", "-"}, true, Call{Op: "inspect", Name: "s", Wait: 2, Expr: "-"}},
		{[]string{"complete", "s", ""}, true, Call{Op: "complete", Name: "s", Wait: 2}},
		{[]string{"complete", "s", "os.pa", "--limit", "3"}, true, Call{Op: "complete", Name: "s", Wait: 2, Text: "os.pa", Limit: 3}},
		{[]string{"reset", "s"}, true, Call{Op: "reset", Name: "s"}},
		{[]string{"reset", "--keep-imports", "s", "--json=t"}, true, Call{Op: "reset", Name: "s", KeepImports: true, JSON: true}},
		{[]string{"vars", "s", "--wait", "601"}, false, Call{}},
		{[]string{"vars", "s", "--wait", "-1"}, false, Call{}},
		{[]string{"vars", "s", "--wait", "NaN"}, false, Call{}},
		{[]string{"vars", "s", "--wait"}, false, Call{}},
		{[]string{"vars", "s", "--limit", "-1"}, false, Call{}},
		{[]string{"vars", "s", "--keep-imports"}, false, Call{}},
		{[]string{"inspect", "s", ""}, false, Call{}},
		{[]string{"inspect", "s", "x", "--all"}, false, Call{}},
		{[]string{"inspect", "s", "x", "--limit", "3"}, false, Call{}},
		{[]string{"inspect", "s"}, false, Call{}},
		{[]string{"complete", "s", "x", "y"}, false, Call{}},
		{[]string{"reset", "s", "--wait", "1"}, false, Call{}},
		{[]string{"reset", "s", "--all"}, false, Call{}},
		{[]string{"reset", "-"}, false, Call{}},
		{[]string{"reset", "--", "s"}, false, Call{}},
		{[]string{"vars", "s", "-h"}, false, Call{}},
	} {
		readsAsCobra(t, tc.args, tc.ok, tc.want)
	}
}

func TestPlainWait(t *testing.T) {
	for _, tc := range []struct {
		args []string
		ok   bool
		want Call // Op and Name are wait and args[1], or as given
	}{
		{[]string{"wait", "s"}, true, Call{Timeout: 30}},
		{[]string{"wait", "lab@gw", "-t", "120"}, true, Call{Timeout: 120}},
		{[]string{"wait", "s", "--cell", "7", "--json"}, true, Call{Timeout: 30, Cell: 7, JSON: true}},
		{[]string{"wait", "--cell=0x10", "s", "--max-output=100"}, true, Call{Name: "s", Timeout: 30, Cell: 16, MaxOutput: 100}},
		{[]string{"wait", "s", "--cell", "0"}, false, Call{}},                                         // given: from 1, as package cli says
		{[]string{"wait", "s", "-t5", "--cell", "3", "--cell", "4"}, true, Call{Timeout: 5, Cell: 4}}, // the last counts
		{[]string{"wait", "s", "--cell", "-1"}, false, Call{}},
		{[]string{"wait", "s", "--cell"}, false, Call{}},
		{[]string{"wait", "s", "--cell", "x"}, false, Call{}},
		{[]string{"wait", "s", "--cell", "--json"}, false, Call{}}, // --json is its value
		{[]string{"wait", "s", "--max-output", "2000001"}, false, Call{}},
		{[]string{"wait", "s", "-t", "0"}, false, Call{}},
		{[]string{"wait", "s", "x"}, false, Call{}}, // one name only
		{[]string{"wait"}, false, Call{}},
		{[]string{"wait", ""}, false, Call{}},
		{[]string{"wait", "-"}, false, Call{}},
		{[]string{"wait", "--", "s"}, false, Call{}},
		{[]string{"wait", "s", "--no-wait"}, false, Call{}},
		{[]string{"wait", "s", "--queue"}, false, Call{}},
		{[]string{"exec", "s", "x", "--cell", "1"}, false, Call{}}, // not exec's
	} {
		c, ok := PlainWait(tc.args)
		assert.Equal(t, tc.ok, ok, "%q", tc.args)
		if ok {
			want := tc.want
			if want.Name == "" {
				want.Name = tc.args[1]
			}
			want.Op = opWait
			assert.Equal(t, want, c, "%q", tc.args)
		}
		w, wok := cobraReads(tc.args)
		assert.Equal(t, wok, ok, "%q: as cobra reads it", tc.args)
		assert.Equal(t, w, c, "%q: as cobra reads it", tc.args)
		if _, isExec := PlainExec(tc.args); isExec {
			t.Errorf("%q: PlainExec takes it too", tc.args)
		}
	}
}

func TestPlainInterruptAndKill(t *testing.T) {
	for _, tc := range []struct {
		args []string
		ok   bool
		cell int
	}{
		{[]string{"interrupt", "s"}, true, 0},
		{[]string{"interrupt", "lab@gw"}, true, 0},
		{[]string{"interrupt", "s", "--cell", "7"}, true, 7},
		{[]string{"interrupt", "--cell=0x10", "s"}, true, 16},
		{[]string{"interrupt", "s", "--cell", "0", "--cell", "3"}, true, 3}, // the last counts
		{[]string{"interrupt", "s", "--cell", "0"}, false, 0},               // given: from 1
		{[]string{"interrupt", "s", "--cell", "3", "--cell", "0"}, false, 0},
		{[]string{"interrupt", "s", "--cell", "-1"}, false, 0},
		{[]string{"interrupt", "s", "--cell"}, false, 0},
		{[]string{"interrupt", "s", "--json"}, false, 0},
		{[]string{"interrupt", "s", "-t", "5"}, false, 0},
		{[]string{"interrupt", "s", "x"}, false, 0},
		{[]string{"interrupt"}, false, 0},
		{[]string{"interrupt", ""}, false, 0},
		{[]string{"interrupt", "-"}, false, 0},
		{[]string{"interrupt", "--", "s"}, false, 0},
		{[]string{"kill", "s"}, true, 0},
		{[]string{"kill", "s", "--cell", "1"}, false, 0},
		{[]string{"kill", "s", "--json"}, false, 0},
		{[]string{"kill", "s", "t"}, false, 0},
		{[]string{"kill", "--", "s"}, false, 0},
		{[]string{"kill", "-h"}, false, 0},
		{[]string{"kill"}, false, 0},
	} {
		c, ok := PlainCall(tc.args)
		assert.Equal(t, tc.ok, ok, "%q", tc.args)
		if ok {
			assert.Equal(t, Call{Op: tc.args[0], Name: "s", Cell: tc.cell}, Call{Op: c.Op, Name: "s", Cell: c.Cell}, "%q", tc.args)
			assert.NotEmpty(t, c.Name)
			assert.Zero(t, c.Timeout, "neither waits for a cell")
		}
		w, wok := cobraReads(tc.args)
		assert.Equal(t, wok, ok, "%q: as cobra reads it", tc.args)
		assert.Equal(t, w, c, "%q: as cobra reads it", tc.args)
	}
}

// Whatever the arguments, PlainExec takes exactly what cobra would read
// as `exec NAME CODE` with at most -t, --json, --max-output, --no-wait,
// --queue, --python, --host and --sudo, PlainRun `run CODE` with those
// but --no-wait and --queue, PlainWait what it would read as `wait NAME` with at most
// -t, --json, --max-output and --cell, PlainSessions `sessions [NAME]`
// with at most --json, PlainInterrupt `interrupt NAME` with at most
// --cell, PlainKill `kill NAME` and PlainQuery a query with its own
// flags, and each reads the same from them; but for go test's flags,
// which pflag skips.
func FuzzPlainExec(f *testing.F) {
	f.Add("exec", "s", "1+1", "", "")
	f.Add("exec", "s", "-", "-t", "5")
	f.Add("exec", "-t5", "s", "x", "")
	f.Add("exec", "s", "x", "--timeout=1e2", "")
	f.Add("exec", "s", "x", "--json", "")
	f.Add("exec", "s", "x", "--json=f", "--queue")
	f.Add("exec", "-", "", "-t=", "")
	f.Add("exec", "--", "s", "x", "-t")
	f.Add("exec", "s", "x", "-t700", "-t1e-10")
	f.Add("exec", "s", "x", "-test.v", "")
	f.Add("exec", "s", "x", "--max-output", "0b101")
	f.Add("exec", "--max-output=2_000_000", "s", "x", "--max-output=-0")
	f.Add("wait", "s", "--cell", "0o17", "-t.5")
	f.Add("wait", "--cell=3", "--json=1", "s", "")
	f.Add("exec", "--no-wait", "s", "x", "--queue=F")
	f.Add("exec", "s", "x", "--host", "--python=p")
	f.Add("exec", "--sudo=t", "s", "x", "--host=")
	f.Add("sessions", "--json", "s", "", "")
	f.Add("sessions", "-t", "5", "--json=0", "")
	f.Add("interrupt", "s", "--cell", "0x3", "")
	f.Add("interrupt", "--cell=0", "s", "--cell=1", "")
	f.Add("kill", "s", "", "", "")
	f.Add("vars", "s", "--wait", "0", "--all")
	f.Add("vars", "--limit=07", "s", "--wait=1.5e-3", "--json")
	f.Add("inspect", "s", "x", "--wait", "+Inf")
	f.Add("complete", "--wait", "2", "s", "")
	f.Add("reset", "s", "--keep-imports=1", "", "")
	f.Add("run", "1+1", "", "", "")
	f.Add("run", "-", "-t", "5", "--json")
	f.Add("run", "--python", "p", "x", "--sudo=0")
	f.Add("run", "x", "--no-wait", "", "")
	f.Add("run", "--host=h", "--max-output=9", "", "x")
	f.Add("run", "--transcript", "x", "", "")
	f.Fuzz(func(t *testing.T, a, b, c, d, e string) {
		for _, args := range [][]string{{a}, {a, b}, {a, b, c}, {a, b, c, d}, {a, b, c, d, e}} {
			got, ok := PlainCall(args)
			want, wok := cobraReads(args)
			if (ok || !goTestFlag(args)) && (ok != wok || got != want) {
				t.Fatalf("PlainCall(%q) = %+v, %v; cobra reads %+v, %v", args, got, ok, want, wok)
			}
		}
	})
}

// The ops early sends are wire's.
func TestOps(t *testing.T) {
	assert.Equal(t, wire.OpExec, opExec)
	assert.Equal(t, wire.OpInterrupt, opInterrupt)
	assert.Equal(t, wire.OpWait, opWait)
	assert.Equal(t, wire.OpSessions, opSessions)
	assert.Equal(t, wire.OpKill, opKill)
	assert.Equal(t, wire.OpVars, opVars)
	assert.Equal(t, wire.OpInspect, opInspect)
	assert.Equal(t, wire.OpComplete, opComplete)
	assert.Equal(t, wire.OpReset, opReset)
	assert.Equal(t, wire.DefaultQueryWait, lean.DefaultQueryWait)
	assert.Equal(t, hub.MaxReplyCap, lean.MaxOutput)
}

func TestPlainSessions(t *testing.T) {
	for _, tc := range []struct {
		args []string
		ok   bool
		want Call
	}{
		{[]string{"sessions"}, true, Call{}},
		{[]string{"sessions", "lab"}, true, Call{Name: "lab"}},
		{[]string{"sessions", "--json"}, true, Call{JSON: true}},
		{[]string{"sessions", "--json=false", "lab@gw"}, true, Call{Name: "lab@gw"}},
		{[]string{"sessions", "a", "b"}, false, Call{}},
		{[]string{"sessions", ""}, false, Call{}},
		{[]string{"sessions", "-"}, false, Call{}},
		{[]string{"sessions", "--"}, false, Call{}},
		{[]string{"sessions", "-t", "5"}, false, Call{}}, // not its flag
		{[]string{"sessions", "--max-output=5"}, false, Call{}},
		{[]string{"sessions", "--json=maybe"}, false, Call{}},
		{[]string{"sessions", "--help"}, false, Call{}},
	} {
		c, ok := PlainSessions(tc.args)
		assert.Equal(t, tc.ok, ok, "%q", tc.args)
		if ok {
			want := tc.want
			want.Op = opSessions
			assert.Equal(t, want, c, "%q", tc.args)
		}
		w, wok := cobraReads(tc.args)
		assert.Equal(t, wok, ok, "%q: as cobra reads it", tc.args)
		assert.Equal(t, w, c, "%q: as cobra reads it", tc.args)
	}
}
