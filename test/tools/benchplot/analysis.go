package main

import (
	"encoding/json"
	"fmt"
	"image/color"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// analysisResults holds the parts of test/bench's AnalysisReport
// (BenchmarkDeliveryAnalysis) that are drawn.
type analysisResults struct {
	Date    string `json:"date"`
	Machine string `json:"machine"`
	Results []struct {
		Label     string `json:"label"`
		Interval  int    `json:"intervalSeconds"`
		CompareTo bool   `json:"compareTo"`
		Soak      int    `json:"soakSeconds"`
		Waves     []struct {
			Name               string  `json:"name"`
			StartedToHealthy   float64 `json:"startedToHealthySeconds"`
			HealthyToCompleted float64 `json:"healthyToCompletedSeconds"`
			Queries            int     `json:"queries"`
		} `json:"waves"`
		Error string `json:"error"`
	} `json:"results"`
}

// analysis draws analysis-wave-time.png and analysis-queries.png into out
// from the results.json of `make bench-analysis`.
func analysis(in, out string) error {
	b, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	var r analysisResults
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	if len(r.Results) == 0 {
		return fmt.Errorf("%s: no results", in)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if err := waveTime(r, filepath.Join(out, "analysis-wave-time.png")); err != nil {
		return err
	}
	return queriesPerWave(r, filepath.Join(out, "analysis-queries.png"))
}

// analysisLabels are the configurations' names on the x axis: the check,
// and the soak under it.
func analysisLabels(r analysisResults) []string {
	labels := make([]string, len(r.Results))
	for i, x := range r.Results {
		labels[i] = fmt.Sprintf("%s\nsoak %d s", x.Label, x.Soak)
		if x.Error != "" {
			labels[i] += "\n(failed)"
		}
	}
	return labels
}

// waveTime draws each configuration's mean wave as two stacked bars:
// started to healthy (the rollout), then healthy to completed (the soak and
// the checks).
func waveTime(r analysisResults, file string) error {
	rollout := make(plotter.Values, len(r.Results))
	checks := make(plotter.Values, len(r.Results))
	for i, x := range r.Results {
		for _, w := range x.Waves {
			rollout[i] += w.StartedToHealthy / float64(len(x.Waves))
			checks[i] += w.HealthyToCompleted / float64(len(x.Waves))
		}
	}
	p := plot.New()
	p.Title.Padding = vg.Points(6)
	p.Title.Text = "Mean time per wave of a 3-wave delivery (10 Deployments, kwok pods, Prometheus scraping every 1 s)"
	p.Y.Label.Text = "seconds per wave"
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	width := vg.Points(22)
	bottom, err := plotter.NewBarChart(rollout, width)
	if err != nil {
		return err
	}
	bottom.Color, bottom.LineStyle.Width = color.Gray{Y: 0xa0}, 0
	top, err := plotter.NewBarChart(checks, width)
	if err != nil {
		return err
	}
	top.Color, top.LineStyle.Width = plotutil.Color(0), 0
	top.StackOn(bottom)
	p.Add(bottom, top)
	p.Legend.Add("started → healthy (rollout)", bottom)
	p.Legend.Add("healthy → completed (soak, checks)", top)
	// Each bar's total above it.
	totals := make(plotter.XYs, len(r.Results))
	names := make([]string, len(r.Results))
	highest := 0.0
	for i := range totals {
		totals[i] = plotter.XY{X: float64(i), Y: rollout[i] + checks[i]}
		names[i] = fmt.Sprintf("%.1f", totals[i].Y)
		highest = max(highest, totals[i].Y)
	}
	labels, err := plotter.NewLabels(plotter.XYLabels{XYs: totals, Labels: names})
	if err != nil {
		return err
	}
	for i := range labels.TextStyle {
		labels.TextStyle[i].XAlign, labels.TextStyle[i].YAlign = -0.5, 0
	}
	p.Add(labels)
	p.Y.Min, p.Y.Max = 0, headroom(highest)
	p.NominalX(analysisLabels(r)...)
	return p.Save(11*vg.Inch, 4.5*vg.Inch, file)
}

// queriesPerWave draws the queries each wave of each configuration sent,
// one bar per wave.
func queriesPerWave(r analysisResults, file string) error {
	var waves []string
	for _, x := range r.Results {
		for _, w := range x.Waves {
			if !contains(waves, w.Name) {
				waves = append(waves, w.Name)
			}
		}
	}
	p := plot.New()
	p.Title.Padding = vg.Points(6)
	p.Title.Text = "Prometheus queries per wave (one query check; two queries per measurement with compareTo: rest)"
	p.Y.Label.Text = "queries"
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	width := vg.Points(9)
	highest := 0.0
	for j, name := range waves {
		values := make(plotter.Values, len(r.Results))
		for i, x := range r.Results {
			for _, w := range x.Waves {
				if w.Name == name {
					values[i] = float64(w.Queries)
					highest = max(highest, values[i])
				}
			}
		}
		bars, err := plotter.NewBarChart(values, width)
		if err != nil {
			return err
		}
		bars.Color, bars.LineStyle.Width = plotutil.Color(j), 0
		bars.Offset = vg.Length(float64(j)-float64(len(waves)-1)/2) * width
		p.Add(bars)
		p.Legend.Add(name, bars)
	}
	p.Y.Min, p.Y.Max = 0, headroom(highest)
	p.NominalX(analysisLabels(r)...)
	return p.Save(11*vg.Inch, 4.5*vg.Inch, file)
}

// headroom is the top of the y axis for bars up to highest: room above
// them for the legend.
func headroom(highest float64) float64 {
	return max(1, highest*1.35)
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
