package recovery_test

import (
	"strings"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/recovery"
)

// ResumeName is a valid execution name for every key, different for each parked state of a
// recovery, and never the name of a recovery's first execution (those end in "-r<round>").
func TestResumeName(t *testing.T) {
	long := strings.Repeat("in_very_long_invoice_", 5)
	tests := map[string]struct {
		st   recovery.State
		want string
	}{
		"invoice":         {recovery.State{PaymentID: "pay_1", Invoice: "inv_42", Round: 1, Seq: 12}, "inv_42-r1-w12"},
		"payment id":      {recovery.State{PaymentID: "pay_1", Round: 2, Seq: 4}, "pay_1-r2-w4"},
		"long key hashed": {recovery.State{PaymentID: "pay_1", Invoice: long, Round: 1, Seq: 1 << 40}, ""},
		"unsafe key":      {recovery.State{PaymentID: "pay_1", Invoice: "inv 42/a", Round: 1, Seq: 6}, ""},
	}
	seen := map[string]bool{}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := recovery.ResumeName(tc.st)
			if tc.want != "" && got != tc.want {
				t.Fatalf("ResumeName = %q, want %q", got, tc.want)
			}
			if len(got) > 80 || strings.ContainsAny(got, " <>{}[]?*\"#%\\^|~`$&,;:/") {
				t.Fatalf("ResumeName = %q: not a valid execution name", got)
			}
			key := tc.st.Invoice
			if key == "" {
				key = tc.st.PaymentID
			}
			if got == recovery.ExecutionName(key, tc.st.Round) || seen[got] {
				t.Fatalf("ResumeName = %q is taken", got)
			}
			seen[got] = true
			next := tc.st
			next.Seq += 2
			if recovery.ResumeName(next) == got {
				t.Fatalf("the next park's name %q is this one's", got)
			}
		})
	}
}

// WorkflowTime: a resumed execution starts at the parked time plus the relay's time since,
// times the factor, never past the planned moment; a timer that fired late on the relay's
// clock resumes at the planned moment itself.
func TestResumeWorkflowTime(t *testing.T) {
	parked := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clock := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC) // the relay's clock lags the workflow's
	plan := parked.Add(48 * time.Hour)
	in := recovery.ResumeInput{State: recovery.State{Plan: &recovery.Plan{Retry: true, At: plan}}, ParkedAt: parked, RelayAt: clock}
	tests := map[string]struct {
		now    time.Time
		factor float64
		want   time.Time
	}{
		"steered early, factor 100":  {clock.Add(time.Minute), 100, parked.Add(100 * time.Minute)},
		"timer on time, factor 100":  {clock.Add(48 * time.Hour / 100), 100, plan},
		"timer late, factor 100":     {clock.Add(time.Hour), 100, plan},
		"AWS, steered after an hour": {clock.Add(time.Hour), 1, parked.Add(time.Hour)},
		"a day stopped, factor 1e9":  {clock.Add(24 * time.Hour), 1e9, plan},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := in.WorkflowTime(tc.now, tc.factor); !got.Equal(tc.want) {
				t.Fatalf("WorkflowTime = %s, want %s", got, tc.want)
			}
		})
	}
}
