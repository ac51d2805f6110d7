package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// Hand-written SVG: two small charts do not justify a plotting dependency.

var sideColors = []string{"#1f77b4", "#d62728"}

// writeCDF draws, for each kind of request, one panel with each side's latency CDF on a log
// time axis.
func writeCDF(w io.Writer, spec loadSpec, sides []sideRun) error {
	const pw, ph, left, top, bottom, gap = 320.0, 240.0, 50.0, 50.0, 50.0, 60.0
	kinds := []string{kindNew, kindReplay, kindInProgress}
	width := left + float64(len(kinds))*(pw+gap)
	height := top + ph + bottom + 30
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="20" font-size="14" font-weight="bold">Latency CDF per idempotent request, same DynamoDB Local, %d in flight (log time axis)</text>`+"\n", left, spec.Concurrency)
	for k, kind := range kinds {
		x0 := left + float64(k)*(pw+gap)
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, s := range sides {
			for _, v := range phaseOf(s, kind).Latencies {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
		if math.IsInf(lo, 0) {
			continue
		}
		lo, hi = math.Pow(10, math.Floor(math.Log10(math.Max(lo, 0.01)))), math.Pow(10, math.Ceil(math.Log10(hi)))
		xs := func(v float64) float64 {
			return x0 + (math.Log10(math.Max(v, lo))-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo))*pw
		}
		ys := func(q float64) float64 { return top + ph - q*ph }
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#999"/>`+"\n", x0, top, pw, ph)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-weight="bold">%s</text>`+"\n", x0+pw/2, top-10, kind)
		for d := lo; d <= hi*1.0001; d *= 10 {
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/><text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n",
				xs(d), top, xs(d), top+ph, xs(d), top+ph+15, fmtMS(d))
		}
		for _, q := range []float64{0, 0.25, 0.5, 0.75, 0.9, 1} {
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/><text x="%.1f" y="%.1f" text-anchor="end">%g</text>`+"\n",
				x0, ys(q), x0+pw, ys(q), x0-4, ys(q)+4, q)
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">latency (ms)</text>`+"\n", x0+pw/2, top+ph+32)
		for i, s := range sides {
			lat := slices.Sorted(slices.Values(phaseOf(s, kind).Latencies))
			var pts []string
			step := max(1, len(lat)/400) // a few hundred points draw the same curve
			for j := 0; j < len(lat); j += step {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", xs(lat[j]), ys(float64(j+1)/float64(len(lat)))))
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", xs(lat[len(lat)-1]), ys(1)))
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", sideColors[i%len(sideColors)], strings.Join(pts, " "))
		}
	}
	for i, s := range sides {
		y := top + ph + bottom + 15
		x := left + float64(i)*360
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="14" height="4" fill="%s"/><text x="%.0f" y="%.0f">%s %s</text>`+"\n",
			x, y-4, sideColors[i%len(sideColors)], x+20, y, s.Implementation, s.Version)
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// writeThroughput draws the local stack's phases as horizontal bars of requests per second,
// labelled with p50/p99.
func writeThroughput(w io.Writer, st stackResult) error {
	const left, top, barH, gap, plotW = 150.0, 40.0, 28.0, 14.0, 420.0
	height := top + float64(len(st.Phases))*(barH+gap) + 10
	hi := 0.0
	for _, p := range st.Phases {
		hi = math.Max(hi, p.PerSec)
	}
	if hi == 0 {
		hi = 1
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", left+plotW+280, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="10" y="20" font-size="14" font-weight="bold">Local stack over loopback, %d clients: requests per second</text>`+"\n", st.Clients)
	for i, p := range st.Phases {
		y := top + float64(i)*(barH+gap)
		bw := p.PerSec / hi * plotW
		fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" text-anchor="end">%s</text>`+"\n", left-8, y+barH/2+4, p.Name)
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.1f" width="%.1f" height="%.0f" fill="%s"/>`+"\n", left, y, bw, barH, sideColors[0])
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%.0f/s  (p50 %.1f ms, p99 %.1f ms)</text>`+"\n", left+bw+6, y+barH/2+4, p.PerSec, p.P50ms, p.P99ms)
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func fmtMS(v float64) string {
	if v < 1 {
		return fmt.Sprintf("%g", v)
	}
	return fmt.Sprintf("%.0f", v)
}

func phaseOf(s sideRun, kind string) phaseRun {
	for _, p := range s.Phases {
		if p.Kind == kind {
			return p
		}
	}
	return phaseRun{Kind: kind}
}
