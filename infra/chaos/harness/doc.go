// Package harness is the chaos run of the local stack: it builds infra/local, runs it as a child
// process on free loopback ports, and drives it with logical payments each sent several times
// (concurrently and later, with the same Idempotency-Key), while it arms simulator faults
// (timeout after effect, 500, 429 with Retry-After, latency), replays webhooks shuffled and
// duplicated, and kills the stack with SIGKILL at random moments, restarting it on the same
// data directory and ports.
//
// At the end it lets the stack settle (bounded), sends every key once more as a late client
// retry, and checks, against the simulator's own PaymentIntents grouped by their
// twice_payment_id metadata:
//
//   - double charges: no logical payment has more than one succeeded PaymentIntent;
//   - lost payments: every payment the stack accepted (201, 402 or 202) is still known and no
//     longer pending, and the provider charged nothing the stack does not know;
//   - replay mismatches: every final answer of a key equals its first, status and body;
//   - status mismatches: the local status equals the provider's, mapped, after the backfill
//     walked the provider's event log (the simulator drops a seeded share of deliveries);
//   - unheard payments: a seeded slice of payments is charged on cards the simulator leaves
//     processing, for a customer every webhook about whom it drops; the run settles those
//     charges at the provider (most succeed, some fail with a hard decline), so only the
//     backfill can bring their outcome: each must end as the provider says, and the backfill
//     must have applied something (Report.BackfillApplied > 0). Each pass is bounded
//     (Config.BackfillMaxEvents), so the backlog takes several passes.
//
// The plan also draws captures and refunds: a share of the payments on the card that always
// succeeds authorizes only (manual capture) and is then captured in full, in part, canceled,
// or left for the stack to surface; another share is refunded once it succeeded (in full, in
// part, several times one after the other, several keys at once), each refund key sent
// several times through the kills and faults armed on /v1/refunds, and a quarter of those on
// pm_card_refundFail, whose refunds fail later at the provider. The check adds, per payment:
//
//   - never more refunded than captured, locally and at the provider;
//   - one provider refund per refund key (the provider's refunds grouped by our
//     twice_refund_id metadata);
//   - local refund state equals the provider's after the late retry, the settle and the
//     backfill: every refund on both sides with one status and amount, and amount_refunded;
//   - every authorization ends captured, canceled, or named by a dead-letter record (a
//     reconciliation past the run's short -capture-window reports it);
//   - every later answer of a capture, cancel or refund key equals its first.
//
// A seed decides the plan (keys, bodies, cards, how many duplicates, the delays, the kill
// points and the sequence of faults); the interleaving of goroutines is the machine's, so two
// runs of one seed send the same requests but not at the same instants. Every wait is bounded:
// Config.Duration is a hard bound, and the report comes even when a run ends incomplete.
//
// The command is infra/chaos; ShortConfig is the run the test command makes.
package harness
