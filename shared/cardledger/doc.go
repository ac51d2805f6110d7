// Package cardledger is the per-card reattempt ledger: every charge attempt on one physical
// card (named by its fingerprint, Stripe's payment_method.card.fingerprint), from every
// recovery and every payment, so that the card networks' excessive-attempt rules, which count
// per card and not per payment, are kept across payments:
//
//   - Visa: at most 20 reattempts per card in 30 days (a reattempt counts whatever its result);
//   - Mastercard: at most 10 declines per card in 24 hours and 35 in 30 days.
//
// A card is one store item (PK "card#<fingerprint>" in the table it is given) holding its
// attempts of the last 30 days, newest last, written under a version condition: a check and
// the record of the attempt it allows commit in one transaction (Update), so two recoveries
// racing on one card cannot both take its last attempt. Pending attempts (reserved before the
// provider call, result not known yet) count as declines: the conservative reading.
//
//	err := cardledger.Update(ctx, st, payments.Table, fp, func(c *cardledger.Card) ([]store.Write, error) {
//		if a := c.Allowance(now); a.Left == 0 {
//			return nil, cardledger.ErrCapped // a.Limit names the cap, a.NextAt when the card may be charged
//		}
//		c.Record(cardledger.Entry{Key: key, At: now, Result: cardledger.ResultPending, Reattempt: true}, now)
//		return otherWritesOfTheAttempt, nil
//	})
package cardledger
