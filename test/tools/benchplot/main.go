// Command benchplot draws the figures of `make bench-peers` from its
// results.json: the latency distribution of every stack at each concurrency
// and the rules-scaling curve, as PNG files in docs/bench, which
// docs/evaluate/performance-and-reliability.md shows. With -analysis it
// draws instead the figures of `make bench-analysis` (analysis.go), which
// docs/evaluate/analysis.md shows, and with -scale the figure of `make
// bench-scale` (scale.go). It lives in a tools
// module of its own so that the product's go.mod does not carry a plotting
// library.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"image/color"
	"log"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// results holds the parts of test/bench/peers' Report that are drawn.
type results struct {
	Date    string `json:"date"`
	Machine string `json:"machine"`
	Latency []struct {
		Stack     string    `json:"stack"`
		Clients   int       `json:"clients"`
		Quantiles []float64 `json:"quantilesMs"`
	} `json:"latency"`
	Rules []struct {
		Stack string  `json:"stack"`
		Rules int     `json:"rules"`
		P99   float64 `json:"p99Ms"`
	} `json:"rules"`
}

// stackOrder fixes each stack's colour and legend position across figures.
// The floor (a webhook that answers at once) comes last, dashed: it is a
// reference, not an engine.
var stackOrder = []string{"none", "vap", "configward", "gatekeeper", "kyverno", "kyverno-cel", "floor"}

func main() {
	in := flag.String("in", "bin/bench-peers/results.json", "results of make bench-peers")
	out := flag.String("out", "docs/bench", "folder for the PNG files")
	analysisIn := flag.String("analysis", "", "results of make bench-analysis (bin/bench-analysis/results.json): draw its figures instead")
	scaleIn := flag.String("scale", "", "results of make bench-scale (bin/bench-scale/results.json): draw its figure instead")
	flag.Parse()
	if *scaleIn != "" {
		if err := scale(*scaleIn, *out); err != nil {
			log.Fatal(err)
		}
		return
	}
	if *analysisIn != "" {
		if err := analysis(*analysisIn, *out); err != nil {
			log.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(*in)
	if err != nil {
		log.Fatal(err)
	}
	var r results
	if err := json.Unmarshal(b, &r); err != nil {
		log.Fatalf("%s: %v", *in, err)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		log.Fatal(err)
	}
	for _, clients := range []int{1, 10, 50} {
		if err := latency(r, clients, filepath.Join(*out, fmt.Sprintf("latency-%d-clients.png", clients))); err != nil {
			log.Fatal(err)
		}
	}
	if err := rules(r, filepath.Join(*out, "rules-scaling.png")); err != nil {
		log.Fatal(err)
	}
}

func colour(stack string) color.Color {
	for i, s := range stackOrder {
		if s == stack {
			return plotutil.Color(i)
		}
	}
	return color.Black
}

// latency draws each stack's latency quantiles at one concurrency: the
// x axis is the share of requests, the y axis the latency they stayed under.
func latency(r results, clients int, file string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Server-side dry-run creates of a 10-container Deployment, %d client(s)", clients)
	p.X.Label.Text = "percentile of requests"
	p.Y.Label.Text = "latency (ms)"
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	drawn := 0
	for _, stack := range stackOrder {
		for _, l := range r.Latency {
			if l.Stack != stack || l.Clients != clients || len(l.Quantiles) == 0 {
				continue
			}
			pts := make(plotter.XYs, len(l.Quantiles))
			for i, q := range l.Quantiles {
				pts[i].X, pts[i].Y = float64(i)+0.5, q
			}
			pts[len(pts)-1].X = 99.9
			line, err := plotter.NewLine(pts)
			if err != nil {
				return err
			}
			line.Color, line.Width = colour(stack), vg.Points(1.5)
			if stack == "floor" {
				line.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			}
			p.Add(line)
			p.Legend.Add(stack, line)
			drawn++
		}
	}
	if drawn == 0 {
		return nil
	}
	return p.Save(8*vg.Inch, 4.5*vg.Inch, file)
}

// rules draws p99 latency at 10 clients against the number of extra rules.
func rules(r results, file string) error {
	p := plot.New()
	p.Title.Text = "p99 latency at 10 clients as rules are added"
	p.X.Label.Text = "extra rules"
	p.Y.Label.Text = "p99 latency (ms)"
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	for _, stack := range stackOrder {
		var pts plotter.XYs
		for _, x := range r.Rules {
			if x.Stack == stack {
				pts = append(pts, plotter.XY{X: float64(x.Rules), Y: x.P99})
			}
		}
		if len(pts) == 0 {
			continue
		}
		line, points, err := plotter.NewLinePoints(pts)
		if err != nil {
			return err
		}
		line.Color, points.Color, line.Width = colour(stack), colour(stack), vg.Points(1.5)
		p.Add(line, points)
		p.Legend.Add(stack, line, points)
	}
	return p.Save(8*vg.Inch, 4.5*vg.Inch, file)
}
