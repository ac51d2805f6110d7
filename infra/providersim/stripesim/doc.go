// Package stripesim is a durable simulator of the part of Stripe's API that twice uses:
// PaymentIntents (create with confirm, confirm, retrieve, list, capture, cancel), refunds, Stripe's
// Idempotency-Key semantics, Stripe's test PaymentMethods, and Stripe-signed webhooks
// delivered from a durable outbox. The production stripe-go adapter talks to it
// unchanged: point a stripe-go backend's URL at it.
//
// # Stripe API (form-encoded requests, JSON answers, Stripe's error envelope)
//
//	POST /v1/payment_intents              create; confirm=true confirms at once
//	POST /v1/payment_intents/{id}/confirm confirm with payment_method (or the stored one)
//	GET  /v1/payment_intents/{id}         retrieve (expand[]=latest_charge)
//	GET  /v1/payment_intents/search       query=metadata['key']:'value' (the one clause supported),
//	                                      limit 1..100 (10); oldest first, never lagging
//	GET  /v1/payment_intents              list: limit 1..100 (10), starting_after, ending_before,
//	                                      created / created[gt|gte|lt|lte], customer; newest first
//	GET  /v1/payment_methods/{id}         a test card's or a /_sim/cards card's PaymentMethod: brand, last4,
//	                                      the fingerprint its charges name (404 resource_missing if unknown)
//	POST /v1/payment_intents/{id}/capture amount_to_capture (default: all of amount_capturable)
//	POST /v1/payment_intents/{id}/cancel  cancellation_reason
//	POST /v1/refunds                      payment_intent or charge, amount (default: the rest),
//	                                      reason, metadata
//	GET  /v1/refunds                      list: payment_intent, charge, created, limit,
//	                                      starting_after, ending_before; newest first
//	GET  /v1/refunds/{id}                 retrieve
//
// Authentication is HTTP basic (the API key as user) or "Authorization: Bearer <key>";
// anything else is 401. An Idempotency-Key (1..255 bytes) is scoped per API key and kept
// 24 h of the injected clock: the same key and parameters replay the saved status and
// body with Idempotent-Replayed: true (declines, 402, included); different parameters
// (or another route) answer 400 idempotency_error. Parameter validation errors and
// unknown resources are not saved, as at Stripe. Concurrent requests with one key run
// one after the other in bbolt's write transaction: the first executes, the rest replay.
//
// Outcomes follow Stripe's test PaymentMethods: pm_card_visa, pm_card_visa_debit,
// pm_card_mastercard and pm_card_amex succeed; pm_card_visa_chargeDeclined (generic_decline),
// ...InsufficientFunds, ...LostCard, ...StolenCard, ...VelocityLimitExceeded
// (card_velocity_exceeded), pm_card_chargeDeclinedExpiredCard, ...IncorrectCvc and
// ...ProcessingError decline with 402 card_error, Stripe's code, decline_code and message,
// the PaymentIntent in the error, and the intent left in requires_payment_method with
// last_payment_error set and payment_method detached. The Charge (expand latest_charge)
// carries outcome.{advice_code, network_advice_code, network_decline_code, reason} and
// payment_method_details.card.brand, which stripe-go's Error type does not expose.
//
// The payment flows follow Stripe's test mode too:
//   - pm_card_threeDSecure2Required and pm_card_authenticationRequired require 3-D Secure.
//     On-session the confirm answers 200 requires_action with client_secret and next_action
//     use_stripe_sdk (redirect_to_url when the confirm gave return_url), no charge yet, and
//     payment_intent.requires_action. Off-session (off_session=true) they decline: 402
//     card_error, code and decline_code authentication_required.
//   - capture_method=manual stops in requires_capture with amount_capturable, the charge's
//     payment_method_details.card.capture_before 7 days on, and
//     payment_intent.amount_capturable_updated. Capture takes amount_to_capture (the rest is
//     released: amount_captured says what was taken) and sends charge.captured and
//     payment_intent.succeeded. Capturing what is not requires_capture, or canceling a
//     succeeded or canceled intent, is 400 payment_intent_unexpected_state.
//   - Cancel (requires_payment_method, requires_confirmation, requires_action,
//     requires_capture, processing) records cancellation_reason, releases a hold and sends
//     payment_intent.canceled.
//   - A refund sends charge.refunded, then refund.created; more than the captured amount not
//     yet refunded is 400 amount_too_large (nothing left: charge_already_refunded). A refund
//     of pm_card_refundFail is succeeded, then fails Config.RefundFailureDelay later on the
//     injected clock (RunDue; Start runs it): status failed, failure_reason
//     expired_or_canceled_card, the charge's amount_refunded given back, and
//     charge.refund.updated, refund.updated, refund.failed.
//
// Capture, cancel and refunds honour Idempotency-Key as creates do.
//
// # Controls (JSON; errors are application/problem+json)
//
//	POST   /_sim/faults  {"path_prefix","fault","count","retry_after_s","latency_ms","method"}
//	GET    /_sim/faults ; DELETE /_sim/faults
//	POST   /_sim/idempotency/expire {"older_than_s"}  (forget keys at least that old; 0: all)
//	POST   /_sim/webhooks/replay {"event_id","times","shuffle","reverse","delay_ms"}
//	POST   /_sim/webhooks/pause ; POST /_sim/webhooks/resume
//	POST   /_sim/webhooks/flush  (send every queued entry now, retry waits included;
//	                               nothing while paused)
//	POST   /_sim/webhooks/drop {"count"} or {"rate","seed"} and/or {"customers"}  (drop the
//	                               next count deliveries; then each event with probability
//	                               rate, by a hash of seed and the event id; and every event
//	                               about those customers' objects, replays included; each
//	                               request replaces the armed loss)
//	GET    /_sim/events?object_id=&type=&state=&limit=&include=event
//	GET    /_sim/stats
//	POST   /_sim/cards {"payment_method","brand","decline_code","code","message","times",
//	                    "advice_code","network_advice_code","network_decline_code","processing"}
//	POST   /_sim/payment_intents {"amount","currency","customer","payment_method","description",
//	                              "metadata","created","webhook"}
//	POST   /_sim/payment_intents/{id}/mutate {"amount","amount_received","currency","status","customer"}
//	POST   /_sim/payment_intents/{id}/settle {"outcome":"succeeded|failed","decline_code"}
//	DELETE /_sim/payment_intents/{id}  (forget it silently: "missing at provider")
//	POST   /_sim/payment_intents/{id}/authenticate {"result":"succeeded"|"failed"}
//	                              (the customer at the 3-D Secure challenge of a requires_action
//	                              intent: succeeded charges it, succeeded or requires_capture;
//	                              failed leaves requires_payment_method with last_payment_error
//	                              payment_intent_authentication_failure and sends
//	                              payment_intent.payment_failed)
//	POST   /_sim/payment_intents/{id}/dispute {"status","reason","amount","evidence_due_in_s",
//	                              "charge_only"} (charge.dispute.created, then .updated; won, lost
//	                              or warning_closed: .closed; charge_only: payment_intent null)
//
// Besides the PaymentIntent routes, the simulator answers Stripe's POST
// /v1/payment_intents/{id}/cancel (payment_intent.canceled), POST /v1/refunds (whole or
// partial, charge.refunded with the charge's amount_refunded) and GET /v1/events (newest
// first; limit, starting_after, ending_before, type with a trailing * wildcard, types[],
// created[gte|gt|lte|lt], delivery_success).
//
// Faults arm the next count /v1 requests whose path starts with path_prefix (so
// "/v1/payment_intents" also arms searches, "/v1/payment_intents/search" searches alone):
// timeout_after_effect performs the request (and saves its idempotent response), then
// holds the connection until the client gives up (or HoldTimeout) and closes it without
// an answer; http_500 answers 500 api_error without any effect; http_429 answers 429
// rate_limit with Retry-After; latency delays the answer by latency_ms of real time.
// Faults are kept in memory only.
//
// # Webhooks
//
// Every state change writes, in the transaction of the change, a Stripe event
// (payment_intent.succeeded, .payment_failed, .processing, .requires_action,
// .amount_capturable_updated, .canceled, charge.captured, charge.refunded, refund.created,
// refund.updated, refund.failed, charge.refund.updated, the dispute events) and an
// outbox entry. The sender (Start, or Deliver for one pass) posts due entries signed
// like Stripe (Stripe-Signature: t=<unix>,v1=<hex HMAC-SHA256>) with the event's
// api_version set to stripe-go's, so webhook.ConstructEvent accepts them. A non-2xx or
// transport error is retried after a full-jitter exponential backoff on the injected
// clock, for RetryHorizon. Entries from different outbox rows go out in parallel, so
// arrival order is not creation order, as at Stripe; the events of one replay go out in
// the order the replay answer lists.
//
// Everything except armed faults lives in providersim.db (bbolt, fsync'd) under DataDir,
// so a restart, even after kill -9, keeps PaymentIntents, idempotency keys, events,
// programmed cards, pause and drop state, and sends what was not yet delivered.
//
// # What is tested against it
//
// The simulator is the stateful Stripe that shared code is tested against, and those tests
// live here, so that tests under shared/ reach no stand-in: the stripe-go adapter passes the
// provider contract suite (providertest.Run) and calls only the endpoints it lists
// (stripeprovider_*_test.go); the attempt log keeps no byte of the client secret a 3-D
// Secure answer carries (attempts_*_test.go); the reconciler finds every class of difference,
// pages both sides and heals what it may (recon_*_test.go).
package stripesim
