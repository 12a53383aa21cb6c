/*
Copyright 2026 The CAPKV Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package monitoring

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// MainPanels are the dashboard panels RenderPanels draws: where machines
// stand, how long they take and where they wait, and the golden images.
var MainPanels = []string{
	"Machines by phase",
	"Machines not provisioned, by reason",
	"Time to provisioned",
	"Time per stage (p90)",
	"Oldest machine per stage",
	"Golden image imports and clones",
}

// RenderPanels draws the panels of the shipped dashboard named in titles
// from this Prometheus' data between start and end, one PNG file per
// panel in dir named after its title, and returns the files' paths.
func (s *Server) RenderPanels(ctx context.Context, titles []string, start, end time.Time, dir string) ([]string, error) {
	panels, err := ShippedDashboard()
	if err != nil {
		return nil, err
	}
	byTitle := map[string]Panel{}
	for _, p := range panels {
		byTitle[p.Title] = p
	}
	var files []string
	for _, title := range titles {
		p, ok := byTitle[title]
		if !ok {
			return files, fmt.Errorf("the dashboard has no panel %q", title)
		}
		path := filepath.Join(dir, fileName(title))
		if err := s.renderPanel(ctx, p, start, end, path); err != nil {
			return files, fmt.Errorf("panel %q: %w", title, err)
		}
		files = append(files, path)
	}
	return files, nil
}

// renderPanel queries each of the panel's queries over [start, end] and
// draws one line per series, as Grafana's time series panel does.
func (s *Server) renderPanel(ctx context.Context, p Panel, start, end time.Time, path string) error {
	// About 300 points across, and a rate over four of them or 30s, as
	// Grafana's $__rate_interval keeps at least a few scrapes in a window.
	step := max(end.Sub(start)/300, time.Second)
	rateInterval := max(4*step, 30*time.Second)
	plt := plot.New()
	plt.Title.Text = p.Title
	plt.X.Label.Text = "seconds"
	plt.Y.Label.Text = unitLabel(p.Unit)
	plt.Y.Min = 0
	plt.Legend.Top = true
	plt.Add(plotter.NewGrid())
	lines, top := 0, 0.0
	for _, q := range p.Queries {
		value, _, err := s.API.QueryRange(ctx, Expand(q.Expr, rateInterval), promv1.Range{Start: start, End: end, Step: step})
		if err != nil {
			return err
		}
		matrix, ok := value.(model.Matrix)
		if !ok {
			return fmt.Errorf("%s returned a %s, not a matrix", q.Expr, value.Type())
		}
		for _, series := range matrix {
			segments := gapless(series.Values, start, step)
			if len(segments) == 0 {
				continue
			}
			for i, points := range segments {
				line, err := plotter.NewLine(points)
				if err != nil {
					return err
				}
				line.Color = plotutil.Color(lines)
				line.Width = vg.Points(1.5)
				plt.Add(line)
				if i == 0 {
					plt.Legend.Add(legend(q.Legend, series.Metric), line)
				}
				for _, pt := range points {
					top = max(top, pt.Y)
				}
			}
			lines++
		}
	}
	plt.X.Min, plt.X.Max = 0, end.Sub(start).Seconds()
	// Room above the lines for the legend, which is drawn inside.
	plt.Y.Max = max(top, 1) * (1.1 + 0.1*float64(lines))
	return plt.Save(8*vg.Inch, 4*vg.Inch, path)
}

// gapless splits a series into runs of points one step apart, seconds
// after start: a series is missing where it had no value (a machine left
// the stage, a quantile of no observations is NaN), and Grafana draws no
// line across such a gap.
func gapless(values []model.SamplePair, start time.Time, step time.Duration) []plotter.XYs {
	var segments []plotter.XYs
	var current plotter.XYs
	var last model.Time
	for _, v := range values {
		f := float64(v.Value)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		if len(current) > 0 && v.Timestamp.Sub(last) > step*3/2 {
			segments = append(segments, current)
			current = nil
		}
		current = append(current, plotter.XY{X: v.Timestamp.Time().Sub(start).Seconds(), Y: f})
		last = v.Timestamp
	}
	if len(current) > 0 {
		segments = append(segments, current)
	}
	return segments
}

var legendLabel = regexp.MustCompile(`\{\{\s*(\w+)\s*\}\}`)

// legend fills a Grafana legend format with the series' labels.
func legend(format string, metric model.Metric) string {
	if format == "" {
		return metric.String()
	}
	return legendLabel.ReplaceAllStringFunc(format, func(m string) string {
		return string(metric[model.LabelName(legendLabel.FindStringSubmatch(m)[1])])
	})
}

func unitLabel(unit string) string {
	switch unit {
	case "s":
		return "seconds"
	case "bytes":
		return "bytes"
	}
	return ""
}

var nonWord = regexp.MustCompile(`[^a-z0-9]+`)

// fileName is a panel's file name: its title in lower case, words joined
// by dashes.
func fileName(title string) string {
	return strings.Trim(nonWord.ReplaceAllString(strings.ToLower(title), "-"), "-") + ".png"
}
