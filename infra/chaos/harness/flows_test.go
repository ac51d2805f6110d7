package harness

import (
	"testing"

	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
)

func TestCheckFlows(t *testing.T) {
	rid := payments.RefundID("local", "k-refund-0")
	created := Answer{201, `{"id":"` + rid + `","status":"succeeded"}`}
	paid := []Intent{{ID: "pi_1", PaymentID: "pay_1", Status: "succeeded", AmountReceived: 1000}}
	refunded := func(status string, amount int64, refunds ...string) flowView {
		v := flowView{Status: status, Amount: 1000, AmountRefunded: amount}
		for _, id := range refunds {
			v.Refunds = append(v.Refunds, struct {
				ID     string `json:"id"`
				Amount int64  `json:"amount"`
				Status string `json:"status"`
			}{id, amount, provider.RefundSucceeded})
		}
		return v
	}
	atProvider := func(n int, amount int64) []ProviderRefund {
		var out []ProviderRefund
		for range n {
			out = append(out, ProviderRefund{ID: "re_x", PaymentIntent: "pi_1", Amount: amount, Status: "succeeded", RefundID: rid, PaymentID: "pay_1"})
		}
		return out
	}
	withRefund := func(v flowView, finals ...Answer) []FlowObservation {
		return []FlowObservation{{Key: "k", ID: "pay_1", RefundKeys: []string{"k-refund-0"}, RefundFinals: [][]Answer{finals}, Found: true, View: v}}
	}
	tests := map[string]struct {
		obs      []FlowObservation
		refunds  []ProviderRefund
		surfaced map[string]bool
		broken   func(FlowFindings) int
	}{
		"clean refund": {
			obs: withRefund(refunded("refunded", 1000, rid), created, created), refunds: atProvider(1, 1000),
			broken: func(f FlowFindings) int { return len(f.Broken()) },
		},
		"two provider refunds for one key": {
			obs: withRefund(refunded("succeeded", 800, rid), created), refunds: atProvider(2, 400),
			broken: func(f FlowFindings) int { return f.DuplicateRefunds },
		},
		"more refunded than captured at the provider": {
			obs: withRefund(refunded("refunded", 1200, rid), created), refunds: atProvider(1, 1200),
			broken: func(f FlowFindings) int { return f.OverRefunded },
		},
		"a refund the stack does not know": {
			obs: withRefund(refunded("succeeded", 0)), refunds: atProvider(1, 500),
			broken: func(f FlowFindings) int { return f.RefundMismatches },
		},
		"a refund still pending locally": {
			obs: withRefund(flowView{Status: "succeeded", Amount: 1000, AmountRefunded: 500, Refunds: []struct {
				ID     string `json:"id"`
				Amount int64  `json:"amount"`
				Status string `json:"status"`
			}{{rid, 500, provider.RefundPending}}}), refunds: atProvider(1, 500),
			broken: func(f FlowFindings) int { return f.RefundMismatches },
		},
		"a refund replayed differently": {
			obs: withRefund(refunded("refunded", 1000, rid), created, Answer{201, `{"status":"pending"}`}), refunds: atProvider(1, 1000),
			broken: func(f FlowFindings) int { return f.FlowReplayMismatches },
		},
		"an authorization left and surfaced": {
			obs:      []FlowObservation{{Key: "k", ID: "pay_1", Capture: CaptureLeave, Found: true, View: flowView{Status: provider.StatusRequiresCapture}}},
			surfaced: map[string]bool{"pay_1": true},
			broken:   func(f FlowFindings) int { return len(f.Broken()) },
		},
		"an authorization left and never surfaced": {
			obs:    []FlowObservation{{Key: "k", ID: "pay_1", Capture: CaptureLeave, Found: true, View: flowView{Status: provider.StatusRequiresCapture}}},
			broken: func(f FlowFindings) int { return f.Unsurfaced },
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var f Findings
			ff := CheckFlows(tc.obs, paid, tc.refunds, tc.surfaced, &f)
			n := tc.broken(ff)
			clean := name == "clean refund" || name == "an authorization left and surfaced"
			if clean && n != 0 || !clean && n == 0 {
				t.Fatalf("%d broken: %+v %v", n, ff, f.Examples)
			}
		})
	}
}

func TestProviderStatusCountsRefunds(t *testing.T) {
	for name, tc := range map[string]struct {
		in   Intent
		want string
	}{
		"partly refunded": {Intent{Status: "succeeded", AmountReceived: 1000, Refunded: 400}, "succeeded"},
		"fully refunded":  {Intent{Status: "succeeded", AmountReceived: 1000, Refunded: 1000}, "refunded"},
		"authorized":      {Intent{Status: "requires_capture"}, "requires_capture"},
	} {
		if got := providerStatus([]Intent{tc.in}); got != tc.want {
			t.Errorf("%s: %q, want %q", name, got, tc.want)
		}
	}
}
