package providertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/provider"
)

// Run checks an implementation of provider.Provider, and of provider.Operations (required),
// against what its callers rely on, driving outcomes with Stripe's test payment methods. newProvider returns the provider under test;
// scope must be unique per run (a simulator keeps its idempotency keys across runs).
func Run(t *testing.T, scope string, newProvider func(t *testing.T) provider.Provider) {
	ctx := context.Background()
	key := func(t *testing.T, n string) string { return provider.IdempotencyKey(scope, t.Name()+"/"+n) }
	customer := func(t *testing.T) string { return "cus_" + provider.IdempotencyKey(scope, t.Name())[10:30] }

	t.Run("create succeeds and echoes the request", func(t *testing.T) {
		p := newProvider(t)
		cus := customer(t)
		got, err := p.Create(ctx, provider.CreateRequest{Amount: 1999, Currency: "usd", Customer: cus,
			PaymentMethod: "pm_card_visa", Metadata: map[string]string{"invoice": "in_1"}, IdempotencyKey: key(t, "1")})
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		if got.ID == "" || got.Status != provider.StatusSucceeded || got.Amount != 1999 || got.Currency != "usd" ||
			got.Customer != cus || got.Metadata["invoice"] != "in_1" || got.Created.IsZero() {
			t.Fatalf("Create = %+v", got)
		}
		again, err := p.Get(ctx, got.ID)
		if err != nil || again.ID != got.ID || again.Status != provider.StatusSucceeded {
			t.Fatalf("Get = %+v, %v", again, err)
		}
	})

	t.Run("the same key gives the same payment", func(t *testing.T) {
		p := newProvider(t)
		req := provider.CreateRequest{Amount: 500, Currency: "eur", Customer: customer(t), PaymentMethod: "pm_card_visa", IdempotencyKey: key(t, "1")}
		first, err1 := p.Create(ctx, req)
		second, err2 := p.Create(ctx, req)
		if err1 != nil || err2 != nil || first.ID != second.ID {
			t.Fatalf("first %+v (%v), second %+v (%v): want one payment", first, err1, second, err2)
		}
	})

	t.Run("the same key with other parameters is a mismatch", func(t *testing.T) {
		p := newProvider(t)
		req := provider.CreateRequest{Amount: 500, Currency: "eur", Customer: customer(t), PaymentMethod: "pm_card_visa", IdempotencyKey: key(t, "1")}
		if _, err := p.Create(ctx, req); err != nil {
			t.Fatal(err)
		}
		req.Amount = 501
		_, err := p.Create(ctx, req)
		if !errors.Is(err, provider.ErrIdempotencyMismatch) {
			t.Fatalf("err = %v, want ErrIdempotencyMismatch", err)
		}
	})

	t.Run("a create without a key is refused", func(t *testing.T) {
		_, err := newProvider(t).Create(ctx, provider.CreateRequest{Amount: 1, Currency: "usd", PaymentMethod: "pm_card_visa"})
		if !errors.Is(err, provider.ErrMissingIdempotencyKey) {
			t.Fatalf("err = %v", err)
		}
	})

	for pm, code := range TestCardDeclines {
		t.Run("decline "+pm, func(t *testing.T) {
			p := newProvider(t)
			got, err := p.Create(ctx, provider.CreateRequest{Amount: 700, Currency: "usd", Customer: customer(t),
				PaymentMethod: pm, IdempotencyKey: key(t, "1")})
			var de *provider.DeclineError
			if !errors.As(err, &de) {
				t.Fatalf("err = %v, want *DeclineError", err)
			}
			if de.Payment.ID == "" || de.Payment.ID != got.ID || got.Status != provider.StatusDeclined ||
				got.Decline == nil || got.Decline.Code != code {
				t.Fatalf("payment = %+v (decline %+v), want declined with %s", got, got.Decline, code)
			}
			stored, err := p.Get(ctx, got.ID)
			if err != nil || stored.Status != provider.StatusDeclined || stored.Decline == nil || stored.Decline.Code != code {
				t.Fatalf("Get after decline = %+v, %v", stored, err)
			}
			// The decline names the card (the per-card reattempt ledger counts on it), the
			// same on the create's answer and on a later read.
			if got.Card == nil || got.Card.Fingerprint == "" || got.Card.Brand == "" ||
				stored.Card == nil || *stored.Card != *got.Card {
				t.Fatalf("declined card %+v, read back %+v; want one fingerprint and brand", got.Card, stored.Card)
			}
		})
	}

	t.Run("each test card has its own fingerprint", func(t *testing.T) {
		p := newProvider(t)
		seen := map[string]string{}
		for pm := range TestCardDeclines {
			_, err := p.Create(ctx, provider.CreateRequest{Amount: 700, Currency: "usd", Customer: customer(t),
				PaymentMethod: pm, IdempotencyKey: key(t, pm)})
			var de *provider.DeclineError
			if !errors.As(err, &de) || de.Payment.Card == nil {
				t.Fatalf("%s: %v, card %+v", pm, err, de)
			}
			if other, ok := seen[de.Payment.Card.Fingerprint]; ok {
				t.Fatalf("%s and %s share fingerprint %s", pm, other, de.Payment.Card.Fingerprint)
			}
			seen[de.Payment.Card.Fingerprint] = pm
		}
	})

	t.Run("a payment method's card is the card its charges name", func(t *testing.T) {
		p := newProvider(t)
		visa, err := p.PaymentMethodCard(ctx, "pm_card_visa")
		if err != nil || visa.Brand != "visa" || visa.Fingerprint == "" {
			t.Fatalf("PaymentMethodCard(pm_card_visa) = %+v, %v; want a visa with a fingerprint", visa, err)
		}
		mc, err := p.PaymentMethodCard(ctx, "pm_card_mastercard")
		if err != nil || mc.Brand != "mastercard" || mc.Fingerprint == "" || mc.Fingerprint == visa.Fingerprint {
			t.Fatalf("PaymentMethodCard(pm_card_mastercard) = %+v, %v; want a mastercard of its own (visa %+v)", mc, err, visa)
		}
		again, err := p.PaymentMethodCard(ctx, "pm_card_visa")
		if err != nil || again != visa {
			t.Fatalf("a second read = %+v, %v; want %+v", again, err, visa)
		}
		// The card a decline names is the card the payment method's read names: the ledger a
		// steered charge reserves on is the one its decline is recorded on.
		const pm = "pm_card_visa_chargeDeclinedInsufficientFunds"
		declined, _ := p.Create(ctx, provider.CreateRequest{Amount: 700, Currency: "usd", Customer: customer(t),
			PaymentMethod: pm, IdempotencyKey: key(t, "1")})
		card, err := p.PaymentMethodCard(ctx, pm)
		if err != nil || declined.Card == nil || card.Fingerprint != declined.Card.Fingerprint || card.Brand != declined.Card.Brand {
			t.Fatalf("PaymentMethodCard(%s) = %+v, %v; the decline named %+v", pm, card, err, declined.Card)
		}
		if _, err := p.PaymentMethodCard(ctx, "src_does_not_exist_"+customer(t)[4:]); !errors.Is(err, provider.ErrNotFound) {
			t.Fatalf("an unknown payment method: err = %v, want ErrNotFound", err)
		}
	})

	t.Run("confirm a declined payment with a working card", func(t *testing.T) {
		p := newProvider(t)
		declined, _ := p.Create(ctx, provider.CreateRequest{Amount: 700, Currency: "usd", Customer: customer(t),
			PaymentMethod: "pm_card_visa_chargeDeclinedInsufficientFunds", IdempotencyKey: key(t, "1")})
		if declined.ID == "" {
			t.Fatal("no declined payment to confirm")
		}
		got, err := p.Confirm(ctx, provider.ConfirmRequest{ID: declined.ID, PaymentMethod: "pm_card_visa",
			OffSession: true, IdempotencyKey: provider.AttemptKey(scope+t.Name(), 2)})
		if err != nil || got.ID != declined.ID || got.Status != provider.StatusSucceeded {
			t.Fatalf("Confirm = %+v, %v", got, err)
		}
	})

	t.Run("get of an unknown id is ErrNotFound", func(t *testing.T) {
		_, err := newProvider(t).Get(ctx, "pi_does_not_exist_"+customer(t)[4:])
		if !errors.Is(err, provider.ErrNotFound) {
			t.Fatalf("err = %v, want ErrNotFound", err)
		}
	})

	t.Run("the key horizon is declared", func(t *testing.T) {
		s, ok := newProvider(t).(provider.Searcher)
		if !ok {
			t.Fatal("the provider declares no key horizon (provider.Searcher)")
		}
		// Stripe's own number: a provider contract that promised longer would let a create be
		// re-sent after the provider forgot its key.
		if h := s.KeyHorizon(); h != provider.StripeKeyHorizon {
			t.Fatalf("KeyHorizon = %s, want %s", h, provider.StripeKeyHorizon)
		}
	})

	t.Run("search by metadata finds our payment by our own id", func(t *testing.T) {
		p := newProvider(t)
		s := p.(provider.Searcher)
		ours := "pay_" + provider.IdempotencyKey(scope, t.Name())[10:34]
		got, err := p.Create(ctx, provider.CreateRequest{Amount: 300, Currency: "usd", Customer: customer(t),
			PaymentMethod: "pm_card_visa", Metadata: map[string]string{"twice_payment_id": ours}, IdempotencyKey: key(t, "1")})
		if err != nil {
			t.Fatal(err)
		}
		found, err := s.SearchMetadata(ctx, "twice_payment_id", ours)
		if err != nil || len(found) != 1 || found[0].ID != got.ID || found[0].Status != provider.StatusSucceeded {
			t.Fatalf("SearchMetadata = %+v, %v; want exactly %s", found, err, got.ID)
		}
		none, err := s.SearchMetadata(ctx, "twice_payment_id", ours+"x")
		if err != nil || len(none) != 0 {
			t.Fatalf("search for an id never used = %+v, %v", none, err)
		}
		if _, err := s.SearchMetadata(ctx, "twice_payment_id", "x' OR '1"); !errors.Is(err, provider.ErrBadSearchValue) {
			t.Fatalf("a value that needs escaping: %v", err)
		}
	})

	t.Run("list finds the payments of a window once each", func(t *testing.T) {
		p := newProvider(t)
		cus := customer(t)
		want := map[string]bool{}
		for _, n := range []string{"1", "2", "3"} {
			got, err := p.Create(ctx, provider.CreateRequest{Amount: 100, Currency: "usd", Customer: cus,
				PaymentMethod: "pm_card_visa", IdempotencyKey: key(t, n)})
			if err != nil {
				t.Fatal(err)
			}
			want[got.ID] = true
		}
		seen := map[string]bool{}
		now := time.Now()
		for got, err := range p.List(ctx, provider.ListParams{CreatedFrom: now.Add(-time.Hour), CreatedTo: now.Add(time.Hour), Customer: cus}) {
			if err != nil {
				t.Fatal(err)
			}
			if seen[got.ID] || got.Customer != cus {
				t.Fatalf("listed %+v twice or for the wrong customer", got)
			}
			seen[got.ID] = true
		}
		for id := range want {
			if !seen[id] {
				t.Fatalf("list missed %s (saw %v)", id, seen)
			}
		}
		for range p.List(ctx, provider.ListParams{CreatedTo: now.Add(-24 * time.Hour), Customer: cus}) {
			t.Fatal("a window before the payments listed one")
		}
	})

	runFlows(t, scope, newProvider)
}
