// Package recon is scheduled reconciliation: it compares a recent window of our payments with
// the provider's and reports each difference once, as a dead-letter record an operator can
// work.
//
// # A run
//
// EventBridge Scheduler calls Reconciler.Handle hourly with a fixed input,
// {"window_hours":2,"scheduled_time":"<aws.scheduler.scheduled-time>"}, and daily with
// "window_hours":25: the window is the hours ending 5 minutes (end_offset_minutes) before the
// scheduled time (or now), truncated to the minute, so each hourly run overlaps the previous one
// by an hour, the provider's events have a few minutes to land, and the Scheduler's retries of
// one run compute the same window. Locally, Every runs the default window, 25 h, hourly. An
// on-demand run gives {"from","to"} instead.
//
// The run id is the window ("recon_20261128T110200Z_20261129T120200Z"). A window that already
// has a report (table recon_runs, written once with a conditional put) returns it without
// comparing again, so a Lambda retry or a second click is harmless.
//
// The provider side is listed over the window (auto-paginated, 100 per page), our side read
// from the payments table's created-time index, one day partition at a time; both widened by a
// margin (10 min) so a payment near an edge finds its counterpart. Then each side's strays are
// looked up by id: the local payment a provider payment names (metadata twice_payment_id, else
// the provider-id alias), and the provider payment a local record names (a Get), before
// anything is called missing.
//
// # Classes
//
// Classify is pure: missing locally (a lost webhook), missing at the provider (a silent failure,
// or an unknown outcome that never reached it), status mismatch (after mapping both to our
// vocabulary), amount or currency mismatch, duplicate charge (two succeeded provider payments for
// one payment of ours, or for one customer, invoice and amount). In-flight states are not
// differences while younger than the grace period (10 min): a payment pending or processing
// locally, an unknown outcome being resolved, a provider payment whose record is being written.
// Only differences whose newest evidence was created inside the window are reported; the margin
// is for matching, the next window reports the rest. Windows are over creation times (the
// provider lists by created), so a change to a payment created before the window, such as a
// refund a week later, is outside every later run: an on-demand run over an older window finds
// it.
//
// # Refunds
//
// For the payments with refunds on either side (the provider's amount_refunded, or a refund
// ledger of ours), each refund on our ledger is compared with the provider's list of the
// payment's refunds (provider.Operations.Refunds, walked page by page): a refund missing
// locally, or behind the provider, heals through the refund path every refund event takes
// (Healer.SettleRefund); one missing at the provider, or ahead of it, is reported (refunds.go).
//
// # Each difference once
//
// A difference's Key is derived from its class, the ids involved and what differs (the two
// statuses, the two amounts). It is opened through a conditional put in recon_differences
// before the Sink (the dead-letter table) hears of it, so the same difference found by the
// next hourly run, or by a concurrent on-demand run, is not reported again. A difference that
// changes (the provider's status moves on) has a new key and is reported anew. The record
// expires after Retention (35 days, longer than any window), after which a difference still
// present is reported again as a reminder; Forget deletes it at once. The Sink must be
// idempotent on Key: a run that dies between the Sink and its own bookkeeping leaves the
// record "opening", and the next run opens it again.
//
// # Metrics
//
// Each run writes CloudWatch Embedded Metric Format lines through Metrics.Out (stdout in
// Lambda; shared/metrics): Differences and NewDifferences per Kind (dimension "Class"), Compared, DurationMs and
// the total NewDifferences per run, namespace Twice, dimension Stage. A replayed run writes none.
package recon
