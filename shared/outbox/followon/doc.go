// Package followon is the outbox relay's registry: every kind of follow-on work the code
// commits to the outbox (package outbox), with the handler that delivers it. The outbox-relay
// function and the local stack build their relay's handlers here and nowhere else, so a kind
// cannot be delivered by one and silently left in the outbox by the other; a test holds the
// registry to the kinds the code writes, in both directions.
//
// Each handler lives with the package that writes its kind (payments.Service.FollowOns,
// recovery.Steerer.ResumeFollowOn and WakeFollowOn, deadletter.Records.RetryFollowOn, payments.DisputeFollowOns,
// payments.RefundFollowOns, backfill.FollowOns, feed.Publisher.Handlers); this package only
// puts them in one table, over the Targets each wiring provides:
//
//	handlers, err := followon.Handlers(followon.Targets{
//		Payments:     &payments.Service{Store: st, Resolver: resolver, OnDecline: recoverer},
//		Steerer:      &recovery.Steerer{Store: st, Starter: starter},
//		DeadLetters:  &deadletter.Records{Store: st, Requeuer: requeuer},
//		WebhookQueue: webhookQueue,
//		Publisher:    &feed.Publisher{Store: st, Sink: sink},
//	})
//	relay := &outbox.Relay{Store: st, Handlers: handlers}
package followon
