package harness

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
)

// WriteTable prints the report as the table the command shows.
func (r Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(name string, v any) { fmt.Fprintf(tw, "%s\t%v\n", name, v) }
	row("seed", r.Seed)
	row("clock start", r.ClockStart.Format("Mon 2 Jan 2006 15:04 MST"))
	if r.ClockJump > 0 {
		row("clock jump at the last kill", fmt.Sprintf("%s (past the provider's 24 h key horizon)", r.ClockJump))
	}
	row("logical payments", r.Payments)
	if r.Throttle > 0 {
		row("calls refused as throttled", fmt.Sprintf("%g of store, queue, runner, event feed and provider calls", r.Throttle))
	}
	row("requests sent", r.Requests)
	row("webhook deliveries", r.WebhookDeliveries)
	row("provider PaymentIntents", r.ProviderIntents)
	row("double charges", r.DoubleCharges)
	row("lost payments", r.Lost)
	row("replay mismatches", r.ReplayMismatches)
	row("status mismatches", r.StatusMismatches)
	if r.DroppedDeliveries > 0 || r.Unheard > 0 {
		row("webhook deliveries dropped", r.DroppedDeliveries)
		row("unheard payments / settled at the provider", fmt.Sprintf("%d / %d (every webhook about them dropped)", r.Unheard, r.UnheardSettled))
		row("applied by backfill", r.BackfillApplied)
		limit := "the stack's default"
		if r.BackfillMaxEvents > 0 {
			limit = fmt.Sprint(r.BackfillMaxEvents)
		}
		row("backfill passes", fmt.Sprintf("%d (longest walk %d passes of at most %s events)", r.BackfillPasses, r.BackfillLongestWalk, limit))
		holds := "yes"
		if r.StatusMismatches != 0 {
			holds = fmt.Sprintf("NO (%d payments differ, %d of them unheard)", r.StatusMismatches, r.UnheardBehind)
		}
		row("local state equals provider after backfill", holds)
	}
	f := r.Flows
	row("manual-capture payments", fmt.Sprintf("%d (captures %d requested / %d captured, cancels %d requested / %d canceled, %d left)",
		r.Manual, f.CapturesRequested, f.Captured, f.CancelsRequested, f.Canceled, f.Left))
	row("refunds requested / succeeded / failed", fmt.Sprintf("%d / %d / %d (%d still pending, %d payments' flows skipped)",
		f.RefundsRequested, f.RefundsSucceeded, f.RefundsFailed, f.RefundsPending, r.FlowsSkipped))
	row("more refunded than captured", f.OverRefunded)
	row("provider refunds beyond one per key", f.DuplicateRefunds)
	row("refund state unlike the provider's", f.RefundMismatches)
	row("authorizations not captured, canceled or surfaced", f.Unsurfaced)
	row("capture/cancel/refund replay mismatches", f.FlowReplayMismatches)
	row("follow-on effects lost", r.FollowOnsLost)
	row("recoverable payments recovered", fmt.Sprintf("%d of %d", r.Recovered, r.Recoverable))
	row("recoveries ended without a named reason", r.UnnamedStops)
	row("unanswered (client gave up)", r.Unanswered)
	if r.Incomplete != "" {
		row("unsettled (run cut off)", r.Unsettled)
	}
	row("final statuses", joinCounts(r.Statuses))
	if r.DeadLetters == nil {
		row("dead-letter records", "n/a")
	} else {
		row("dead-letter records", joinCounts(r.DeadLetters))
	}
	if r.Reconciliation == nil {
		row("reconciliation differences", "n/a")
	} else {
		row("reconciliation differences", joinCounts(r.Reconciliation))
	}
	if r.Recoveries == nil {
		row("recoveries", "n/a")
	} else {
		row("recoveries", r.Recoveries.String())
	}
	row("answers by status", joinCounts(r.Answers))
	row("kills (-9) and restarts", r.Kills)
	row("faults armed / injected", fmt.Sprintf("%d / %d", r.Faults, r.FaultsInjected))
	row("webhook replays", r.Replays)
	row("time", fmt.Sprintf("%.1fs (build and start %.1fs, drive %.1fs, settle %.1fs)", r.Seconds, r.StartSeconds, r.DriveSeconds, r.SettleSeconds))
	if r.Incomplete != "" {
		row("incomplete", r.Incomplete)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, e := range r.Examples {
		fmt.Fprintln(w, "  "+e)
	}
	return nil
}

// joinCounts prints a count map as "a 3, b 1" in key order ("0" when empty).
func joinCounts(m map[string]int) string {
	if len(m) == 0 {
		return "0"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
