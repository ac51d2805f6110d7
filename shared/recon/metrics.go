package recon

import (
	"github.com/runtwice/twice/shared/metrics"
)

// Metrics writes each run's counts as CloudWatch Embedded Metric Format lines (namespace
// Twice, dimension Stage): Lambda's log stream is the transport, CloudWatch extracts the
// metrics. One line per class (dimension Class: Differences found, NewDifferences opened) and
// one for the run (Compared, DurationMs, and NewDifferences over every class, which the
// new-differences alarm watches).
type Metrics struct {
	Out *metrics.EMF // nil writes nothing
}

// MetricNewDifferences is the run's count of differences opened for the first time.
const MetricNewDifferences = "NewDifferences"

func (m *Metrics) emit(rep Report) {
	if m == nil {
		return
	}
	at := rep.FinishedAt
	fields := map[string]any{"RunId": rep.RunID}
	opened := 0
	for _, c := range Kinds {
		opened += rep.Opened[c]
		m.Out.Put(at, []metrics.Dim{{Name: "Class", Value: string(c)}}, fields,
			metrics.Value{Name: "Differences", Unit: metrics.Count, V: float64(rep.Found[c])},
			metrics.Value{Name: MetricNewDifferences, Unit: metrics.Count, V: float64(rep.Opened[c])})
	}
	m.Out.Put(at, nil, fields,
		metrics.Value{Name: "Compared", Unit: metrics.Count, V: float64(rep.ComparedLocal + rep.ComparedProvider)},
		metrics.Value{Name: "DurationMs", Unit: metrics.Milliseconds, V: float64(rep.DurationMS)},
		metrics.Value{Name: MetricNewDifferences, Unit: metrics.Count, V: float64(opened)})
}
