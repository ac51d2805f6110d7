package harness

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Card is a test PaymentMethod of the simulator and the local status it ends in.
type Card struct {
	PaymentMethod string
	Weight        int // relative frequency in a plan
}

// Cards is the mix a plan draws from: mostly a card that succeeds, some declines (a soft one, a
// hard one, a processing error, each declining every time), recoverable cards, and payments
// the stack hears of only through the provider's event log.
var Cards = []Card{
	{"pm_card_visa", 70},
	{"pm_card_visa_chargeDeclinedInsufficientFunds", 6},
	{"pm_card_visa_chargeDeclinedLostCard", 6},
	{"pm_card_chargeDeclinedProcessingError", 6},
	{Recoverable, 6},
	{Unheard, 6},
}

// Recoverable stands in the card mix for a card of its own, programmed in the simulator to
// decline a few times with a soft decline and then succeed: the default recovery policy must
// recover every one of them, on any day.
const Recoverable = "recoverable"

// Unheard stands in the card mix for a card of its own that the simulator leaves processing,
// paid by the plan's unheard customer (UnheardCustomer), every webhook about whom the simulator
// drops: the run settles the charge at the provider after the API answered "processing", so
// only the provider's event log, walked by the backfill, can tell the stack how it ended.
const Unheard = "unheard"

// UnheardCustomer is the customer of a plan's unheard payments.
func UnheardCustomer(seed uint64) string { return fmt.Sprintf("cus_chaos_unheard_%d", seed) }

// Settle outcomes of unheard payments: most succeed; some fail with a hard decline, which
// stops their recovery at once (a dead letter) rather than charging the card again.
const (
	SettleSucceeded = "succeeded"
	SettleFailed    = "failed"
	// SettleDeclineCode is the decline of a failed settle.
	SettleDeclineCode = "lost_card"
)

// Recovery is how a recoverable payment's card declines before it succeeds.
type Recovery struct {
	Code  string // a soft decline code
	Times int    // declines before the first success, the original charge included
}

// recoveries are the programmed declines a plan draws from: each one retried within the
// window by the default policy on every day of the calendar (shared/recovery's sweep), so
// each must end recovered. Insufficient funds gets one retry at least, so it declines once.
var recoveries = []Recovery{
	{"insufficient_funds", 1},
	{"card_velocity_exceeded", 1}, {"card_velocity_exceeded", 3},
	{"processing_error", 1}, {"processing_error", 2}, {"processing_error", 4},
}

// clockStarts is the span a plan's clock start is drawn from: four calendar years, one of
// them a leap year, so runs of different seeds start on different days.
var clockStarts = [2]time.Time{time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}

// Payment is one logical payment of a plan: one Idempotency-Key and one body, sent First
// times at once and then Later times after Delay.
type Payment struct {
	Index  int
	Key    string
	Body   string
	Card   string
	First  int           // concurrent sends of the first wave (2..3)
	Later  int           // sends of the second wave (1..2)
	Delay  time.Duration // between the waves
	Client uint64        // seed of this payment's client (its retry jitter)
	// Recover is set for a recoverable card (Card is then its own pm_ id).
	Recover *Recovery
	// SettleAs is set for an unheard payment (Card is then its own pm_ id): how the run
	// settles its charge at the provider, SettleSucceeded or SettleFailed.
	SettleAs string
	// Amount is the body's amount.
	Amount int64
	// Capture is set for a manual-capture payment (the body asks "capture_method":"manual"):
	// what the run does with its authorization (CaptureFull, CapturePartial, CaptureCancel,
	// CaptureLeave).
	Capture string
	// CaptureAmount is the amount_to_capture of a partial capture.
	CaptureAmount int64
	// Refunds are the refunds the run asks for once the payment succeeded, in waves:
	// refunds of one Wave go at once, each wave after the one before.
	Refunds []RefundOp
}

// RefundOp is one refund request of a plan: one Idempotency-Key and its amount (0: what
// remains), sent Sends times (concurrent duplicates, then a later retry).
type RefundOp struct {
	Key    string
	Amount int64
	Sends  int
	Wave   int
}

// What a plan does with a manual-capture payment's authorization.
const (
	CaptureFull    = "full"
	CapturePartial = "partial"
	CaptureCancel  = "cancel"
	// CaptureLeave leaves the authorization alone: the stack must surface it (a
	// reconciliation record naming the payment) before the hold lapses.
	CaptureLeave = "leave"
)

// RefundFailCard is Stripe's test card whose refunds are accepted and fail later.
const RefundFailCard = "pm_card_refundFail"

// Refund shapes a plan draws from.
const (
	refundFull       = "full"       // one refund of what remains
	refundPartial    = "partial"    // one refund of a third
	refundSeveral    = "several"    // two or three partial refunds, one after the other
	refundConcurrent = "concurrent" // three or four refunds of two fifths each, at once
)

// Plan is everything a seed decides: the payments, where the kills fall and the chaos
// schedule. Timing between goroutines is not decided by the seed, so two runs of one seed send
// the same requests and arm the same faults in the same order, but not at the same instants.
type Plan struct {
	Seed     uint64
	Payments []Payment
	// KillAt holds, in ascending order, the number of payments started at which the stack is
	// killed.
	KillAt []int
	// ClockStart is the stack's clock start (-clock-start), in whole minutes.
	ClockStart time.Time
}

// NewPlan draws the plan of a seed.
func NewPlan(seed uint64, payments, kills int, maxDelay time.Duration) Plan {
	rng := rand.New(rand.NewPCG(seed, 0x6368616f73)) // "chaos"
	p := Plan{Seed: seed, Payments: make([]Payment, payments)}
	total := 0
	for _, c := range Cards {
		total += c.Weight
	}
	for i := range p.Payments {
		card := Cards[0].PaymentMethod
		for n, c := rng.IntN(total), 0; ; c++ {
			if n < Cards[c].Weight {
				card = Cards[c].PaymentMethod
				break
			}
			n -= Cards[c].Weight
		}
		var rec *Recovery
		settleAs := ""
		switch card {
		case Recoverable:
			r := recoveries[rng.IntN(len(recoveries))]
			rec, card = &r, fmt.Sprintf("pm_chaos_recoverable_%d_%06d", seed, i)
		case Unheard:
			settleAs, card = SettleSucceeded, fmt.Sprintf("pm_chaos_unheard_%d_%06d", seed, i)
			if rng.IntN(4) == 0 {
				settleAs = SettleFailed
			}
		}
		amount := 500 + rng.IntN(99_500)
		customer := fmt.Sprintf("cus_chaos_%03d", rng.IntN(200))
		if settleAs != "" {
			customer = UnheardCustomer(seed)
		}
		p.Payments[i] = Payment{
			Recover:  rec,
			SettleAs: settleAs,
			Index:    i,
			Key:      fmt.Sprintf("chaos-%d-%06d", seed, i),
			Body: fmt.Sprintf(`{"amount":%d,"currency":"usd","customer":%q,"payment_method":%q,"description":"chaos %d/%d"}`,
				amount, customer, card, seed, i),
			Card:   card,
			First:  2 + rng.IntN(2),
			Later:  1 + rng.IntN(2),
			Delay:  time.Duration(rng.Int64N(int64(maxDelay) + 1)),
			Client: rng.Uint64(),
		}
	}
	// Kills fall between 10 % and 90 % of the payments started, so each one lands among
	// requests in flight and some payments start after the last restart.
	for range kills {
		p.KillAt = append(p.KillAt, payments/10+rng.IntN(max(1, payments*8/10)))
	}
	slices.Sort(p.KillAt)
	span := int64(clockStarts[1].Sub(clockStarts[0]) / time.Minute)
	p.ClockStart = clockStarts[0].Add(time.Duration(rng.Int64N(span)) * time.Minute)
	drawFlows(seed, p.Payments)
	return p
}

// drawFlows gives some of the payments on the card that always succeeds a manual capture
// (about 15 %: captured in full, in part, canceled, or left alone) and refunds (about 25 %,
// a quarter of them on the card whose refunds fail later). Its own generator leaves every
// other draw of a seed as it was.
func drawFlows(seed uint64, pays []Payment) {
	rng := rand.New(rand.NewPCG(seed, 0x666c6f7773)) // "flows"
	for i := range pays {
		p := &pays[i]
		var amount int64
		if _, err := fmt.Sscanf(p.Body, `{"amount":%d,`, &amount); err != nil {
			panic(err) // the body is NewPlan's own
		}
		p.Amount = amount
		if p.Card != Cards[0].PaymentMethod {
			continue
		}
		captured := amount
		switch n := rng.IntN(100); {
		case n < 15:
			p.Capture = []string{CaptureFull, CaptureFull, CapturePartial, CaptureCancel, CaptureLeave}[rng.IntN(5)]
			if p.Capture == CapturePartial {
				p.CaptureAmount = amount/2 + rng.Int64N(amount/4)
				captured = p.CaptureAmount
			}
			p.Body = strings.Replace(p.Body, `"description"`, `"capture_method":"manual","description"`, 1)
		case n < 40:
			if rng.IntN(4) == 0 {
				p.Card = RefundFailCard
				p.Body = strings.Replace(p.Body, Cards[0].PaymentMethod, RefundFailCard, 1)
			}
		default:
			continue
		}
		if p.Capture == CaptureCancel || p.Capture == CaptureLeave || (p.Capture != "" && rng.IntN(2) == 0) {
			continue
		}
		op := func(j int, amount int64, wave int) RefundOp {
			return RefundOp{Key: fmt.Sprintf("%s-refund-%d", p.Key, j), Amount: amount, Sends: 1 + rng.IntN(3), Wave: wave}
		}
		switch []string{refundFull, refundPartial, refundSeveral, refundConcurrent}[rng.IntN(4)] {
		case refundFull:
			p.Refunds = []RefundOp{op(0, 0, 0)}
		case refundPartial:
			p.Refunds = []RefundOp{op(0, captured/3, 0)}
		case refundSeveral:
			for j := range 2 + rng.IntN(2) {
				p.Refunds = append(p.Refunds, op(j, captured/4, j))
			}
		case refundConcurrent:
			for j := range 3 + rng.IntN(2) {
				p.Refunds = append(p.Refunds, op(j, captured*2/5, 0))
			}
		}
	}
}

// Recoverable counts the plan's recoverable payments.
func (p Plan) Recoverable() int {
	n := 0
	for _, pay := range p.Payments {
		if pay.Recover != nil {
			n++
		}
	}
	return n
}

// Manual counts the plan's manual-capture payments.
func (p Plan) Manual() int {
	n := 0
	for _, pay := range p.Payments {
		if pay.Capture != "" {
			n++
		}
	}
	return n
}

// RefundKeys counts the refund requests (keys) of the plan.
func (p Plan) RefundKeys() int {
	n := 0
	for _, pay := range p.Payments {
		n += len(pay.Refunds)
	}
	return n
}

// Unheard counts the plan's unheard payments.
func (p Plan) Unheard() int {
	n := 0
	for _, pay := range p.Payments {
		if pay.SettleAs != "" {
			n++
		}
	}
	return n
}
