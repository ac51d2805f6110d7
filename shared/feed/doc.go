// Package feed publishes every applied change of a payment exactly once, in order per
// payment, to downstream systems: the outbox (payments.KindPublishChange, committed with the
// change) hands each change to a Publisher, which numbers it with the payment's next sequence
// and puts it to a Sink: the local stack's durable log (Log, served as GET /events?after=) or an
// EventBridge bus in AWS (shared/eventbus).
//
// Exactly once per change: the payment's publication state (the last version and sequence
// published) commits with the publication, so a redelivered outbox message finds its version
// already published and is dropped. In order: a change older than the last published one is
// superseded and dropped (it can only arrive late after its own delivery failed); consumers
// see sequences 1, 2, 3 ... for each payment, each with the payment as that change left it.
package feed
