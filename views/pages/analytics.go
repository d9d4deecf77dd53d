package pages

import (
	"fmt"
	"strconv"
)

// AnalyticsVM feeds Analytics (the error analytics page).
type AnalyticsVM struct {
	Filter AnalyticsFilter
	// AsOf says how fresh the figures are ("as of 08:01"); "" when read live.
	AsOf string
	// Error says why the filter was refused (422); the figures are then absent.
	Error   string
	Advice  []AnalyticsAdvice
	Figures []AnalyticsFigure
	Charts  []Chart
	Tables  []DataTable
}

// AnalyticsFilter is the GET form: its field names are the query keys of the page and the
// API (range, from, to, workflowId, stepId, errorType, client).
type AnalyticsFilter struct {
	Action     string
	Range      string
	From, To   string
	StepID     string
	Client     string
	Ranges     []Option
	Workflows  []Option
	ErrorTypes []Option
	Errors     map[string]string // by query key
}

// AnalyticsAdvice is a recommendation in words and the figure behind it.
type AnalyticsAdvice struct {
	Code   string
	Text   string
	Figure string
}

// AnalyticsFigure is a headline figure: its label, value, what it counts and how it
// compares with the span before ("" when not compared).
type AnalyticsFigure struct {
	ID    string
	Label string
	Value string
	Note  string
	Trend string
}

// DataTable is a table of numbers: a chart's table view, or a breakdown, with its CSV.
type DataTable struct {
	ID      string
	Caption string
	Head    []string
	Rows    [][]string
	CSVURL  string
	Empty   string
}

// Chart is a bar chart drawn as SVG: per bar (a day, an attempt number) its segments
// stacked (Stacked) or side by side; the table holds the same numbers.
type Chart struct {
	ID      string
	Title   string
	Desc    string
	Bars    []ChartBar
	Legend  []ChartSeries
	Stacked bool
	Table   DataTable
}

// ChartSeries is a series' name and its colour class (series-0 … series-9).
type ChartSeries struct {
	Name  string
	Class string
}

// ChartBar is one bar's label and its values, one per series.
type ChartBar struct {
	Label  string
	Values []int
}

// Chart geometry, in SVG user units.
const (
	chartW      = 720
	chartH      = 220
	chartLeft   = 40
	chartBottom = 28
	chartTop    = 10
)

// ChartRect is a drawn rectangle with its tooltip.
type ChartRect struct {
	X, Y, W, H string
	Class      string
	Title      string
}

// ChartTick is an axis label.
type ChartTick struct {
	X, Y  string
	Label string
}

// Max is the largest bar (stacked: the largest sum), at least 1.
func (c Chart) Max() int {
	m := 1
	for _, b := range c.Bars {
		s := 0
		for _, v := range b.Values {
			if c.Stacked {
				s += v
			} else {
				s = max(s, v)
			}
		}
		m = max(m, s)
	}
	return m
}

func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// ViewBox is the SVG's view box.
func (c Chart) ViewBox() string { return fmt.Sprintf("0 0 %d %d", chartW, chartH) }

// Rects are the chart's bars as rectangles.
func (c Chart) Rects() []ChartRect {
	n := len(c.Bars)
	if n == 0 {
		return nil
	}
	plotH := float64(chartH - chartBottom - chartTop)
	slot := float64(chartW-chartLeft) / float64(n)
	gap := slot * 0.2
	m := float64(c.Max())
	var out []ChartRect
	for i, b := range c.Bars {
		x0 := float64(chartLeft) + float64(i)*slot + gap/2
		w := slot - gap
		y := float64(chartH - chartBottom)
		for j, v := range b.Values {
			if v == 0 {
				continue
			}
			h := plotH * float64(v) / m
			name, class := "", "series-"+strconv.Itoa(j%10)
			if j < len(c.Legend) { // drawn in its legend's colour
				name, class = c.Legend[j].Name, c.Legend[j].Class
			}
			r := ChartRect{Class: class, Title: b.Label + " · " + name + ": " + strconv.Itoa(v)}
			if c.Stacked {
				y -= h
				r.X, r.Y, r.W, r.H = f1(x0), f1(y), f1(w), f1(h)
			} else {
				k := float64(len(b.Values))
				r.X, r.Y, r.W, r.H = f1(x0+w/k*float64(j)), f1(float64(chartH-chartBottom)-h), f1(w/k), f1(h)
			}
			out = append(out, r)
		}
	}
	return out
}

// XTicks label the bars (at most about 12 labels, evenly spaced).
func (c Chart) XTicks() []ChartTick {
	n := len(c.Bars)
	if n == 0 {
		return nil
	}
	slot := float64(chartW-chartLeft) / float64(n)
	every := max(1, (n+11)/12)
	var out []ChartTick
	for i := 0; i < n; i += every {
		out = append(out, ChartTick{X: f1(float64(chartLeft) + slot*(float64(i)+0.5)), Y: strconv.Itoa(chartH - 8), Label: c.Bars[i].Label})
	}
	return out
}

// YTicks are 0, half and the maximum.
func (c Chart) YTicks() []ChartTick {
	m := c.Max()
	plotH := float64(chartH - chartBottom - chartTop)
	var out []ChartTick
	for _, v := range []int{0, m / 2, m} {
		if v == m/2 && (v == 0 || v == m) {
			continue
		}
		out = append(out, ChartTick{X: strconv.Itoa(chartLeft - 6), Y: f1(float64(chartH-chartBottom) - plotH*float64(v)/float64(m) + 4), Label: strconv.Itoa(v)})
	}
	return out
}

// Baseline is the y of the x axis.
func (c Chart) Baseline() string { return strconv.Itoa(chartH - chartBottom) }
