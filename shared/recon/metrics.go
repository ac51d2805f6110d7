package recon

import (
	"encoding/json"
	"io"
	"sync"
)

// DefaultNamespace is the CloudWatch namespace of the reconciliation metrics.
const DefaultNamespace = "twice/Reconciliation"

// Metrics writes each run's counts as CloudWatch Embedded Metric Format lines: Lambda's log
// stream is the transport, CloudWatch extracts the metrics, no API call and no library. One line
// per class (dimension Class: Differences found, NewDifferences opened) and one for the run
// (Compared, DurationMs).
type Metrics struct {
	W         io.Writer // os.Stdout in Lambda
	Namespace string    // default DefaultNamespace
	mu        sync.Mutex
}

type emfMetric struct {
	Name string `json:"Name"`
	Unit string `json:"Unit"`
}

type emfDirective struct {
	Namespace  string      `json:"Namespace"`
	Dimensions [][]string  `json:"Dimensions"`
	Metrics    []emfMetric `json:"Metrics"`
}

type emfMeta struct {
	Timestamp         int64          `json:"Timestamp"`
	CloudWatchMetrics []emfDirective `json:"CloudWatchMetrics"`
}

func (m *Metrics) emit(rep Report) {
	if m == nil || m.W == nil {
		return
	}
	ns := m.Namespace
	if ns == "" {
		ns = DefaultNamespace
	}
	ts := rep.FinishedAt.UnixMilli()
	line := func(dims []string, metrics []emfMetric, fields map[string]any) {
		fields["_aws"] = emfMeta{Timestamp: ts, CloudWatchMetrics: []emfDirective{{Namespace: ns, Dimensions: [][]string{dims}, Metrics: metrics}}}
		fields["RunId"] = rep.RunID
		b, _ := json.Marshal(fields)
		m.mu.Lock()
		defer m.mu.Unlock()
		m.W.Write(append(b, '\n')) //nolint:errcheck // a lost metric line must not fail the run
	}
	for _, c := range Classes {
		line([]string{"Class"}, []emfMetric{{"Differences", "Count"}, {"NewDifferences", "Count"}},
			map[string]any{"Class": string(c), "Differences": rep.Found[c], "NewDifferences": rep.Opened[c]})
	}
	line([]string{}, []emfMetric{{"Compared", "Count"}, {"DurationMs", "Milliseconds"}},
		map[string]any{"Compared": rep.ComparedLocal + rep.ComparedProvider, "DurationMs": rep.DurationMS})
}
