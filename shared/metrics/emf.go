package metrics

import (
	"encoding/json"
	"io"
	"sync"
	"time"
)

// Level is the log level of every metric line (see the package doc).
const Level = "WARN"

// Namespace is the CloudWatch namespace of every twice metric.
const Namespace = "Twice"

// StageDimension is the dimension every metric carries.
const StageDimension = "Stage"

// Units used by twice's metrics.
const (
	Count        = "Count"
	Milliseconds = "Milliseconds"
	Seconds      = "Seconds"
)

// Dim is one dimension of a metric line, after Stage.
type Dim struct{ Name, Value string }

// Value is one metric on a line.
type Value struct {
	Name string
	Unit string
	V    float64
}

// EMF writes metric lines to W (os.Stdout in Lambda). A nil *EMF writes nothing.
type EMF struct {
	W         io.Writer
	Namespace string // default Namespace
	Stage     string // the Stage dimension's value; default "local"
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

// Put writes one line at time at: the values under the dimensions Stage plus dims, and
// fields as extra properties (searchable in Logs Insights, not metrics). A lost line never
// fails the caller.
func (e *EMF) Put(at time.Time, dims []Dim, fields map[string]any, values ...Value) {
	if e == nil || e.W == nil || len(values) == 0 {
		return
	}
	ns, stage := e.Namespace, e.Stage
	if ns == "" {
		ns = Namespace
	}
	if stage == "" {
		stage = "local"
	}
	line := make(map[string]any, len(fields)+len(dims)+len(values)+3)
	for k, v := range fields {
		line[k] = v
	}
	names := []string{StageDimension}
	line[StageDimension] = stage
	for _, d := range dims {
		names = append(names, d.Name)
		line[d.Name] = d.Value
	}
	ms := make([]emfMetric, len(values))
	for i, v := range values {
		ms[i] = emfMetric{Name: v.Name, Unit: v.Unit}
		line[v.Name] = v.V
	}
	line["level"] = Level
	line["_aws"] = emfMeta{Timestamp: at.UnixMilli(), CloudWatchMetrics: []emfDirective{{Namespace: ns, Dimensions: [][]string{names}, Metrics: ms}}}
	b, err := json.Marshal(line)
	if err != nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	_, _ = e.W.Write(append(b, '\n'))
}
