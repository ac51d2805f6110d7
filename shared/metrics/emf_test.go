package metrics_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/metrics"
)

func TestPutWritesOneEMFLineWithStageAndLevel(t *testing.T) {
	var out bytes.Buffer
	e := &metrics.EMF{W: &out, Stage: "prod"}
	at := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	e.Put(at, []metrics.Dim{{Name: "Class", Value: "missing_locally"}}, map[string]any{"RunId": "r1"},
		metrics.Value{Name: "Differences", Unit: metrics.Count, V: 2})
	var line struct {
		Level       string  `json:"level"`
		Stage       string  `json:"Stage"`
		Class       string  `json:"Class"`
		RunID       string  `json:"RunId"`
		Differences float64 `json:"Differences"`
		AWS         struct {
			Timestamp         int64
			CloudWatchMetrics []struct {
				Namespace  string
				Dimensions [][]string
				Metrics    []struct{ Name, Unit string }
			}
		} `json:"_aws"`
	}
	if err := json.Unmarshal(out.Bytes(), &line); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	d := line.AWS.CloudWatchMetrics
	if line.Level != "WARN" || line.Stage != "prod" || line.Class != "missing_locally" || line.RunID != "r1" ||
		line.Differences != 2 || line.AWS.Timestamp != at.UnixMilli() || len(d) != 1 || d[0].Namespace != "Twice" ||
		len(d[0].Dimensions) != 1 || len(d[0].Dimensions[0]) != 2 || d[0].Dimensions[0][0] != "Stage" ||
		d[0].Dimensions[0][1] != "Class" || len(d[0].Metrics) != 1 || d[0].Metrics[0].Name != "Differences" {
		t.Fatalf("line %s", out.String())
	}
	if bytes.Count(out.Bytes(), []byte("\n")) != 1 {
		t.Fatalf("want one line: %q", out.String())
	}
}

func TestNilAndEmptyWriteNothing(t *testing.T) {
	var e *metrics.EMF
	e.Put(time.Time{}, nil, nil, metrics.Value{Name: "X", V: 1}) // must not panic
	var out bytes.Buffer
	(&metrics.EMF{W: &out}).Put(time.Time{}, nil, nil)
	if out.Len() != 0 {
		t.Fatalf("wrote %q", out.String())
	}
}
