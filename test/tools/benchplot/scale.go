package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// scaleResults holds the parts of test/scale's Results that are drawn.
type scaleResults struct {
	Date string `json:"date"`
	Rows []struct {
		Size struct {
			Pods int `json:"pods"`
		} `json:"size"`
		Process     string  `json:"process"`
		RSSMiB      float64 `json:"rssMiB"`
		LiveHeapMiB float64 `json:"liveHeapMiB"`
	} `json:"rows"`
}

// scale draws the figure of `make bench-scale`: each process's resident
// memory and live heap against the cluster's Pods.
func scale(in, out string) error {
	b, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	var r scaleResults
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	p := plot.New()
	p.Title.Text = "Memory against cluster size (Pods, with as many ConfigMaps and Secrets and a workload per 5 Pods)"
	p.X.Label.Text = "Pods in the cluster"
	p.Y.Label.Text = "MiB"
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	for i, process := range []string{"webhook", "controller"} {
		for _, series := range []struct {
			name   string
			value  func(int) float64
			dashed bool
		}{
			{"RSS", func(j int) float64 { return r.Rows[j].RSSMiB }, false},
			{"live heap", func(j int) float64 { return r.Rows[j].LiveHeapMiB }, true},
		} {
			var pts plotter.XYs
			for j, row := range r.Rows {
				if row.Process == process {
					pts = append(pts, plotter.XY{X: float64(row.Size.Pods), Y: series.value(j)})
				}
			}
			if len(pts) == 0 {
				continue
			}
			line, points, err := plotter.NewLinePoints(pts)
			if err != nil {
				return err
			}
			line.Color, points.Color = plotutil.Color(i), plotutil.Color(i)
			line.Width = vg.Points(1.5)
			if series.dashed {
				line.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			}
			p.Add(line, points)
			p.Legend.Add(process+" "+series.name, line, points)
		}
	}
	return p.Save(8*vg.Inch, 4.5*vg.Inch, filepath.Join(out, "scale-memory.png"))
}
