package deadletter

import (
	"time"

	"github.com/runtwice/twice/shared/metrics"
)

// EMF writes the open count as the DeadLetterOpen metric (namespace Twice, dimension Stage)
// in Embedded Metric Format; the dead-letter alarms watch it. Every writer of records
// (deadletter-sink, operator-api, recovery-steps, reconciler) wires one.
type EMF struct {
	Out *metrics.EMF
}

// MetricOpen is the metric name of the open count.
const MetricOpen = "DeadLetterOpen"

// Open writes one metric line for the open count n at time at.
func (m *EMF) Open(n int64, at time.Time) {
	if m == nil {
		return
	}
	m.Out.Put(at, nil, nil, metrics.Value{Name: MetricOpen, Unit: metrics.Count, V: float64(n)})
}
