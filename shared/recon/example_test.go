package recon_test

import (
	"fmt"
	"time"

	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/recon"
)

// A scheduled run at 12:07:31 covers the 25 hours ending at 12:02, and is named by them.
func ExampleDefaultWindow() {
	w := recon.DefaultWindow(time.Date(2026, 11, 29, 12, 7, 31, 0, time.UTC), recon.DefaultWindowHours, recon.DefaultEndOffset)
	fmt.Println(w.From.Format(time.RFC3339), w.To.Format(time.RFC3339))
	fmt.Println(w.RunID())
	// Output:
	// 2026-11-28T11:02:00Z 2026-11-29T12:02:00Z
	// recon_20261128T110200Z_20261129T120200Z
}

// Classify decides from both sides of a window; here the provider has a succeeded payment our
// records never heard of, and one of ours the provider charged a different amount for.
func ExampleClassify() {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	created := now.Add(-2 * time.Hour)
	snap := recon.Snapshot{
		Window: recon.DefaultWindow(now, 25, 5*time.Minute),
		Now:    now,
		Local: []payments.Payment{{ID: "pay_1", ProviderPaymentID: "pi_1", Status: "succeeded", Amount: 1000,
			Currency: "usd", CreatedAt: created}},
		Remote: []provider.Payment{
			{ID: "pi_1", Status: provider.StatusSucceeded, Amount: 1200, Currency: "usd", Created: created},
			{ID: "pi_2", Status: provider.StatusSucceeded, Amount: 500, Currency: "usd", Customer: "cus_9", Created: created},
		},
	}
	for _, d := range recon.Classify(snap, recon.DefaultGrace) {
		fmt.Println(d.Kind+":", d.Explanation)
	}
	// Output:
	// missing_locally: The provider has a successful payment pi_2 of 500 usd for customer "cus_9" (status succeeded) but we have no record of it: a webhook was probably lost, or our write failed after the provider call.
	// amount_mismatch: Payment pay_1 is for 1000 usd in our records but 1200 usd at the provider (pi_1).
}
