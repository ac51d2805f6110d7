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
// Plan, Input and Attempt are JSON because they travel through the recovery state machine;
// Plan.At is UTC in whole seconds, ready for a Wait state's TimestampPath. Time and randomness
// are injected (NextAttempt takes both; Planner holds a clock and a source).
package recovery
