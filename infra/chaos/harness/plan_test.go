package harness

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestPlanIsTheSeeds(t *testing.T) {
	a := NewPlan(42, 500, 3, 2*time.Second)
	b := NewPlan(42, 500, 3, 2*time.Second)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("two plans of one seed differ")
	}
	c := NewPlan(43, 500, 3, 2*time.Second)
	if reflect.DeepEqual(a.Payments[0], c.Payments[0]) {
		t.Fatal("two seeds drew the same first payment")
	}
}

func TestPlanShape(t *testing.T) {
	tests := map[string]struct {
		payments, kills int
	}{
		"default": {1000, 3},
		"short":   {60, 1},
		"no kill": {10, 0},
		"tiny":    {1, 2},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := NewPlan(7, tc.payments, tc.kills, time.Second)
			if len(p.Payments) != tc.payments || len(p.KillAt) != tc.kills {
				t.Fatalf("%d payments, %d kills", len(p.Payments), len(p.KillAt))
			}
			keys := map[string]bool{}
			cards := map[string]int{}
			for i, pay := range p.Payments {
				if keys[pay.Key] {
					t.Fatalf("key %s twice", pay.Key)
				}
				keys[pay.Key] = true
				cards[pay.Card]++
				if pay.Index != i || pay.First < 2 || pay.First > 3 || pay.Later < 1 || pay.Later > 2 ||
					pay.Delay < 0 || pay.Delay > time.Second || !strings.Contains(pay.Body, pay.Card) {
					t.Fatalf("payment %d out of shape: %+v", i, pay)
				}
			}
			for i, k := range p.KillAt {
				if k < tc.payments/10 || k > tc.payments || (i > 0 && k < p.KillAt[i-1]) {
					t.Fatalf("kill points %v out of range for %d payments", p.KillAt, tc.payments)
				}
			}
			if p.ClockStart.Before(clockStarts[0]) || !p.ClockStart.Before(clockStarts[1]) || p.ClockStart.Second() != 0 {
				t.Fatalf("clock start %s outside %v", p.ClockStart, clockStarts)
			}
			recoverable := 0
			for _, pay := range p.Payments {
				if pay.Recover != nil {
					recoverable++
					if !strings.HasPrefix(pay.Card, "pm_chaos_recoverable_") || pay.Recover.Times < 1 {
						t.Fatalf("recoverable payment %+v", pay)
					}
					cards[Recoverable]++
					cards[pay.Card]--
				}
			}
			if recoverable != p.Recoverable() {
				t.Fatalf("Recoverable() = %d, counted %d", p.Recoverable(), recoverable)
			}
			unheard := 0
			for _, pay := range p.Payments {
				if pay.SettleAs == "" {
					if strings.Contains(pay.Body, UnheardCustomer(7)) {
						t.Fatalf("a heard payment of the unheard customer: %+v", pay)
					}
					continue
				}
				unheard++
				if !strings.HasPrefix(pay.Card, "pm_chaos_unheard_") || (pay.SettleAs != SettleSucceeded && pay.SettleAs != SettleFailed) ||
					!strings.Contains(pay.Body, `"customer":"`+UnheardCustomer(7)+`"`) || pay.Recover != nil {
					t.Fatalf("unheard payment %+v", pay)
				}
				cards[Unheard]++
				cards[pay.Card]--
			}
			if unheard != p.Unheard() {
				t.Fatalf("Unheard() = %d, counted %d", p.Unheard(), unheard)
			}
			// The flows: refunds on the card whose refunds fail later count as the card that
			// always succeeds (they are drawn from it), manual captures ask for it, and every
			// refund key is the plan's once.
			cards[Cards[0].PaymentMethod] += cards[RefundFailCard]
			delete(cards, RefundFailCard)
			manual, refundKeys := 0, 0
			for _, pay := range p.Payments {
				if (pay.Capture != "") != strings.Contains(pay.Body, `"capture_method":"manual"`) || pay.Amount < 500 ||
					(pay.Capture == CapturePartial) != (pay.CaptureAmount > 0) || pay.CaptureAmount >= pay.Amount {
					t.Fatalf("manual-capture payment out of shape: %+v", pay)
				}
				if pay.Capture != "" {
					manual++
				}
				if (pay.Card == RefundFailCard) && (len(pay.Refunds) == 0 || pay.Capture != "") {
					t.Fatalf("a payment on %s without refunds: %+v", RefundFailCard, pay)
				}
				if len(pay.Refunds) > 0 && (pay.Capture == CaptureCancel || pay.Capture == CaptureLeave || (pay.Card != Cards[0].PaymentMethod && pay.Card != RefundFailCard)) {
					t.Fatalf("refunds of a payment that never succeeds: %+v", pay)
				}
				for _, op := range pay.Refunds {
					if keys[op.Key] || op.Sends < 1 || op.Amount < 0 || op.Amount > pay.Amount {
						t.Fatalf("refund %+v of %+v", op, pay)
					}
					keys[op.Key] = true
					refundKeys++
				}
			}
			if manual != p.Manual() || refundKeys != p.RefundKeys() {
				t.Fatalf("Manual() = %d, RefundKeys() = %d; counted %d, %d", p.Manual(), p.RefundKeys(), manual, refundKeys)
			}
			if tc.payments >= 1000 && (manual < tc.payments/20 || refundKeys < tc.payments/10) {
				t.Fatalf("%d manual captures, %d refund keys in %d payments", manual, refundKeys, tc.payments)
			}
			for k, n := range cards {
				if n == 0 {
					delete(cards, k)
				}
			}
			if tc.payments >= 1000 && (cards["pm_card_visa"] < tc.payments*6/10 || len(cards) != len(Cards)) {
				t.Fatalf("card mix %v", cards)
			}
		})
	}
}
