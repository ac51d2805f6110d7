// Package outbox makes follow-on work part of the state change that causes it. A writer adds
// an outbox message (New) to the same store transaction as its state change, under a
// deterministic id; a relay delivers each message at least once to the handler of its kind and
// only then marks it done (deletes it). Nothing is called after a commit and merely logged when
// it fails: a failed delivery stays in the outbox and is tried again with jittered backoff.
//
// Two relays share the delivery rule (Relay.Deliver): locally Relay.Run drains the embedded
// store's outbox (a message committed before a kill -9 is delivered after the restart); in AWS
// the outbox table's DynamoDB stream invokes a relay function (outboxlambda.Handler), with Lambda's
// retries, BisectBatchOnFunctionError and an on-failure destination behind it.
//
//	w, _ := outbox.New("start_recovery", "recovery#pay_1#r1", payload, now)
//	store.Transact(ctx, paymentWrite, w) // both or neither
//	relay := &outbox.Relay{Store: s, Handlers: map[string]outbox.Handler{"start_recovery": start}}
//	relay.Drain(ctx)
//
// Handlers must be idempotent (a message can be delivered twice: the relay may die between the
// delivery and the delete); the ids make that easy to check downstream. Both relays take their
// handlers from one registry, package followon.
package outbox
