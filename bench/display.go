package main

import (
	"context"
	"flag"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/replhub/replhub/client"
)

func init() {
	measureAlone("display", "measure only rich results and await: a trivial cell in a session whose loop runs between cells, a figure through MCP (needs matplotlib for -mpl-python)", displayRows)
}

var mplPython = flag.String("mpl-python", "/usr/bin/python3", "interpreter with matplotlib, for -display")

// displayRows measures what rich results and top-level await cost: a
// trivial cell in a session that has awaited (its event loop runs between
// cells) against one in a session that never did; and, through a real
// `replhub mcp`, the time from the end of a cell's code to its reply
// holding the figure it left open, against the same for a cell with no
// figure.
func displayRows(w *world, n int) ([]row, error) {
	ctx := context.Background()
	o := client.ExecOptions{Cwd: w.cwd, Env: w.env}
	trivial := func(name string) (time.Duration, error) {
		var ds []time.Duration
		for i := 0; i < max(n, 500); i++ {
			t0 := time.Now()
			if _, err := w.c.Exec(ctx, name, "1", o); err != nil {
				return 0, err
			}
			ds = append(ds, time.Since(t0))
		}
		return median(ds), nil
	}
	if _, err := w.c.Exec(ctx, "plain", "import asyncio", o); err != nil {
		return nil, err
	}
	if _, err := w.c.Exec(ctx, "awaited", "import asyncio\nawait asyncio.sleep(0)", o); err != nil {
		return nil, err
	}
	var plain, awaited []time.Duration
	for round := 0; round < 3; round++ { // in turn, against drift
		p, err := trivial("plain")
		if err != nil {
			return nil, err
		}
		a, err := trivial("awaited")
		if err != nil {
			return nil, err
		}
		plain, awaited = append(plain, p), append(awaited, a)
	}
	p, a := median(plain), median(awaited)
	rows := []row{{"trivial cell `1`, session whose event loop runs between cells (client package)", us(a),
		"session that never awaited " + us(p), fmt.Sprintf("%.2fx", float64(a)/float64(p)), "about 1x"}}

	if exec.Command(*mplPython, "-c", "import matplotlib").Run() != nil {
		fmt.Printf("(no matplotlib for %s: the figure row is left out)\n", *mplPython)
		return rows, nil
	}
	cmd := exec.Command(w.bin, "mcp")
	cmd.Env = append(append([]string(nil), w.env...), "REPLHUB_PYTHON="+*mplPython)
	cmd.Dir = w.cwd
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return nil, err
	}
	defer cs.Close()
	call := func(code string) (*sdk.CallToolResult, time.Time, error) {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "exec", Arguments: map[string]any{"name": "fig", "code": code}})
		return res, time.Now(), err
	}
	if _, _, err := call("import time, matplotlib.pyplot as plt\nplt.plot([1, 2]); plt.show()"); err != nil {
		return nil, err
	}
	// number runs code and reads the float it prints.
	number := func(code string) (float64, error) {
		res, _, err := call(code)
		if err != nil || len(res.Content) == 0 {
			return 0, fmt.Errorf("%q: %v", code, err)
		}
		return strconv.ParseFloat(strings.TrimSpace(res.Content[0].(*sdk.TextContent).Text), 64)
	}
	// endToReply is the time from the end of code's last line to the MCP
	// reply, read on the same clock; the image's bytes with it.
	endToReply := func(code string) (time.Duration, int, error) {
		res, got, err := call(code + "\n_t_end = time.time()")
		if err != nil {
			return 0, 0, err
		}
		size := 0
		for _, c := range res.Content {
			if img, ok := c.(*sdk.ImageContent); ok {
				size = len(img.Data)
			}
		}
		end, err := number("print(repr(_t_end))")
		return got.Sub(time.Unix(0, int64(end*1e9))), size, err
	}
	// The figure's own rendering, in the session, as the inline backend
	// renders it (a new figure, as in the cell): what replhub adds is the
	// rest. Measured in turn with the figure cells, against drift.
	const plot = "plt.plot(range(100), [i * i for i in range(100)])"
	const savefig = "import io\nf = plt.figure(); " + plot + "\nt0 = time.perf_counter(); f.savefig(io.BytesIO(), format='png', bbox_inches='tight'); print(time.perf_counter() - t0); plt.close(f)"
	var figs, nones, renders []time.Duration
	size := 0
	for i := 0; i < max(n/2, 10); i++ {
		fig, sz, err := endToReply(plot)
		if err != nil {
			return nil, err
		}
		none, _, err := endToReply("x = list(range(100))")
		if err != nil {
			return nil, err
		}
		render, err := number(savefig)
		if err != nil {
			return nil, err
		}
		figs, nones, renders = append(figs, fig), append(nones, none), append(renders, time.Duration(render*float64(time.Second)))
		size = sz
	}
	fig, none, rd := median(figs), median(nones), median(renders)
	rows = append(rows,
		row{fmt.Sprintf("end of a cell to its MCP reply with the figure it left open (PNG %.1f KB)", float64(size)/1000),
			ms(fig), "matplotlib's savefig of it alone " + ms(rd), fmt.Sprintf("%.2fx (%+.1f ms)", float64(fig)/float64(rd), float64((fig-rd).Microseconds())/1000), "about 1x: matplotlib's rendering is the cost"},
		row{"end of a cell to its MCP reply, no figure", ms(none), "", "", ""})
	return rows, nil
}
