// Package eventbus is the feed.Sink on an Amazon EventBridge bus: each payment change is one
// PutEvents entry (source "twice.payments", detail-type the event's type, detail the
// feed.Event as JSON), and the payment's publication state is stored once the bus took it.
// A crash between the two puts the same event again (same id and sequence): EventBridge
// delivers at least once anyway, so consumers dedupe on detail.id.
package eventbus
