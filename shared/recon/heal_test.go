package recon

import (
	"testing"

	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
)

func TestProviderAhead(t *testing.T) {
	cases := map[string]struct {
		local, remote    string
		localRef, remRef int64
		ahead            bool
	}{
		"pending to succeeded":         {local: "pending", remote: "succeeded", ahead: true},
		"processing to declined":       {local: "processing", remote: "declined", ahead: true},
		"processing to canceled":       {local: "processing", remote: "canceled", ahead: true},
		"declined then paid":           {local: "declined", remote: "succeeded", ahead: true},
		"succeeded then refunded":      {local: "succeeded", remote: "refunded", ahead: true},
		"a partial refund":             {local: "succeeded", remote: "succeeded", remRef: 500, ahead: true},
		"a second partial refund":      {local: "succeeded", remote: "succeeded", localRef: 500, remRef: 900, ahead: true},
		"refunded here, less there":    {local: "succeeded", remote: "succeeded", localRef: 900, remRef: 500},
		"refunded here, paid there":    {local: "refunded", remote: "succeeded", localRef: 2000},
		"paid here, declined there":    {local: "succeeded", remote: "declined"},
		"paid here, canceled there":    {local: "succeeded", remote: "canceled"},
		"canceled here, paid there":    {local: "canceled", remote: "succeeded"},
		"refunded here, pending there": {local: "refunded", remote: "pending", localRef: 2000},
		"the same":                     {local: "succeeded", remote: "succeeded"},
		"declined here, pending there": {local: "declined", remote: "pending"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			p := &payments.Payment{Status: c.local, Amount: 2000, AmountRefunded: c.localRef}
			r := provider.Payment{Status: provider.Status(c.remote), Amount: 2000, AmountRefunded: c.remRef}
			if got := ProviderAhead(p, r); got != c.ahead {
				t.Fatalf("ProviderAhead = %v, want %v", got, c.ahead)
			}
		})
	}
}
