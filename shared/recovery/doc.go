// Package recovery recovers failed payments. Its planning half (plan*.go) decides, from a
// decline's classification (package declines), the payment's attempt history and the
// configured Policy, whether to retry and exactly when, and says why in one plain sentence the
// console can show:
//
//   - hard, cancellation, data, auth, review and config declines stop at once;
//   - insufficient funds waits for the next payday or billing-cycle boundary, at a configured
//     hour in a configured time zone; daily limits wait for the next day;
//   - technical declines back off within minutes with full jitter:
//     random(0, min(cap, base*2^n));
//   - generic declines retry days apart, a few times, then ask the customer;
//   - a Mastercard Merchant Advice Code delay (MAC 02, 24-30) and a provider Retry-After are
//     honoured exactly, without jitter;
//   - Visa's 20 reattempts per card in 30 days, Mastercard's 10 declines in 24 hours and 35 in
//     30 days, Policy.MaxAttempts and Policy.Window are never broken: a retry that would break
//     a network cap moves to the first moment the cap allows, and one that cannot happen
//     inside the window stops as exhausted.
//
// Plan, Input and Charge are JSON because they travel through the recovery state machine;
// Plan.At is UTC in whole seconds, ready for a Wait state's TimestampPath. Time and randomness
// are injected (NextAttempt takes both; Planner holds a clock and a source).
//
// Its running half executes statemachines/payment-recovery.asl.json. Steps.Handle is the one
// Task entry point (the recovery-steps Lambda through LambdaHandler, or the local runner's
// TaskFunc); it dispatches on the input's "step":
//
//   - plan (StepPlan): reads the payment, classifies its decline and plans the next attempt;
//   - charge (StepCharge): at the planned moment, re-confirms the payment's PaymentIntent
//     off-session with its payment method under the provider key
//     provider.AttemptKey(invoice or payment id, attempt), records the outcome on the payment
//     (payments.VersionAt on the service's clock, which the provider's events share, so a
//     newer webhook state wins) and in the history the execution carries, and plans again
//     after a decline;
//   - dead_letter (StepDeadLetter): opens one DeadLetter per payment and round, in plain
//     language with the suggested action, through a DeadLetterSink;
//   - park (StepPark): ends the execution at the planned wait: commits the recovery's parked
//     state (payments.Recovery) with a timer, a KindResume outbox message due at the planned
//     moment (resume.go), whose delivery (Steerer.ResumeFollowOn) starts the execution that
//     resumes the recovery; a steering signal brings the timer forward (WakeFollowOn);
//   - steer (StepSteer): applies a stored steering signal (steer.go): charge soon with the
//     customer's new payment method within the card caps, stop, or plan again (replan) when a
//     later provider event reclassified the decline (generic to authentication_required: a
//     class that never retries ends in the dead letter that asks for the customer).
//
// Every charge checks and records the card's network caps in the per-card ledger (package
// cardledger) in one transaction with its other writes.
//
// A retry is Park, then the resumed execution's Begin -> Charge -> Decide: 4 state
// transitions per attempt; a recovery costs 4 + 4 per attempt when it succeeds and 5 + 4 per
// attempt when it ends in a dead letter (a hard decline: 5), and no execution is open while
// it waits. Errors carry Step Functions names for Retry and Catch:
// Recovery.Transient (the provider's unknown outcome, throttling or outage, a store error:
// retried by the Task with full jitter, safe because the key repeats), Recovery.Invalid and
// Recovery.Rejected (caught into the dead-letter state, then the execution fails).
//
// Starting: Recoverer is the payments API's DeclineHandler. It starts the machine for every
// declined payment, hard declines included, so the dead-letter step is the one place that
// records them; the execution name is ExecutionName(invoice or payment id, round), so a
// second start (the payment_failed webhook, a replay) is already started. stepfunctions.Starter
// starts on AWS Step Functions (shared/stepfunctions, so this package links no Step Functions
// client); the local runner's asl.Starter (infra/asl, so no Lambda binary links
// the interpreter) satisfies Starter too. Both count ExecutionAlreadyExists as success.
package recovery
