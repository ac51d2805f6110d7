package recovery

import (
	"strings"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/declines"
)

func TestChargeNowPlan(t *testing.T) {
	insufficient := classify("insufficient_funds", declines.NetworkVisa)
	tests := map[string]struct {
		in        Input
		wantRetry bool
		wantAt    time.Time
		wantLimit Limit
		wantText  string
	}{
		"after an exhausted schedule: at once": {
			in:        Input{Classification: insufficient, Charges: history(insufficient, 9, now.Add(-time.Hour), 24*time.Hour)},
			wantRetry: true, wantAt: now, wantText: "Charging now",
		},
		"never before the declined attempt": {
			in:        Input{Classification: insufficient, Charges: history(insufficient, 2, now.Add(time.Hour), time.Hour)},
			wantRetry: true, wantAt: now.Add(time.Hour + time.Second), wantText: "Charging now",
		},
		"Visa's 20 in 30 days used up": {
			in:        Input{Classification: insufficient, Charges: history(insufficient, 21, now.Add(-time.Hour), time.Hour)},
			wantLimit: LimitVisa30d, wantText: "Visa's limit of 20 reattempts",
		},
		"Mastercard's 10 declines in 24 hours": {
			in: Input{Classification: classify("insufficient_funds", declines.NetworkMastercard),
				Charges: history(classify("insufficient_funds", declines.NetworkMastercard), 10, now.Add(-time.Minute), time.Minute)},
			wantLimit: LimitMastercard24h, wantText: "Mastercard's limit of 10 declines",
		},
		"a lost card is never charged again": {
			in:       Input{Classification: classify("lost_card", declines.NetworkVisa), Charges: history(classify("lost_card", declines.NetworkVisa), 1, now, 0)},
			wantText: "forbid charging this card again",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := ChargeNowPlan(tc.in, now)
			if p.Retry != tc.wantRetry || p.Limit != tc.wantLimit || !strings.Contains(p.Explanation, tc.wantText) {
				t.Fatalf("plan %+v", p)
			}
			if tc.wantRetry && (!p.At.Equal(tc.wantAt) || p.Attempt != len(tc.in.Charges)+1 || p.Reason != ReasonChargeNow) {
				t.Fatalf("plan %+v, want at %s attempt %d", p, tc.wantAt, len(tc.in.Charges)+1)
			}
			if tc.wantLimit != "" && !strings.Contains(p.Explanation, "may next be charged on") {
				t.Fatalf("a cap's refusal names no next moment: %q", p.Explanation)
			}
		})
	}
}
