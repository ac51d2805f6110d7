// Package backfill replays the provider's event log through payments.Applier, the path a
// webhook delivery's event takes: the events since a durable checkpoint (and, on a first run,
// every event the provider could not deliver in its lookback), oldest first, each decoded as
// the delivery a webhook would have been. The Applier's dedupe on event id and change makes an
// event that did arrive a harmless duplicate, and its version rule makes an old one stale, so
// a pass may repeat or overlap any earlier one.
//
// The walk follows the list's cursor and commits it after every page and where a pass stops
// (at its limit, or with less time left than its reserve, read after every event), so a backlog
// of any size is walked completely across passes, invocations and crashes (see Backfill).
//
// An event that cannot be applied now is put in the outbox (KindRequeue) before the
// cursor moves past it; the outbox relay sends it to the webhook queue (FollowOns), so the
// pass needs no queue client: in AWS the reconciler, which runs it, links DynamoDB only.
//
//	b := &backfill.Backfill{Store: st, Events: stripeClient, Applier: applier}
//	rep, err := b.Run(ctx, backfill.Request{})
//	relay.Handlers[backfill.KindRequeue] = backfill.FollowOns(webhookQueue)[backfill.KindRequeue]
package backfill
