package deadletter_test

import (
	"encoding/json"
	"testing"

	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/queue"
)

// FuzzSinkRecord: whatever a dead message holds, the sink builds a record it can store (the
// payload is JSON) with a known class, and the same message always names the same record.
func FuzzSinkRecord(f *testing.F) {
	for _, s := range []struct{ queue, body string }{
		{"webhooks-dlq", `{"provider":"stripe","event_id":"evt_1","body":"e30="}`},
		{"resolve-dlq", `{"scope":"local","key":"k","payment_id":"pay_1"}`},
		{"webhooks-dlq", `{"provider":"standard"}`},
		{"resolve-dlq", `not json`},
		{"x-dlq", ``},
		{"webhooks-dlq", `{"provider":"<b>","event_id":"evt\n1"}`},
	} {
		f.Add(s.queue, s.body)
	}
	sink := &deadletter.Sink{}
	f.Fuzz(func(t *testing.T, dlq, body string) {
		m := queue.Message{ID: "m", Body: []byte(body), Source: "arn:aws:sqs:eu-west-1:1:" + dlq, ReceiveCount: 3}
		r := sink.Record(m)
		if _, err := json.Marshal(r); err != nil {
			t.Fatalf("record does not encode: %v", err)
		}
		known := false
		for _, c := range deadletter.Causes {
			known = known || c == r.Cause
		}
		if !known || r.Key == "" {
			t.Fatalf("class %q key %q", r.Cause, r.Key)
		}
		if again := sink.Record(m); again.Key != r.Key || again.Source != r.Source {
			t.Fatalf("the same message gave two keys")
		}
	})
}
