package stripesim_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runtwice/twice/infra/providersim/stripesim"
	"github.com/runtwice/twice/shared/attempts"
	"github.com/runtwice/twice/shared/boltstore"
	"github.com/runtwice/twice/shared/clock"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/redact"
	"github.com/runtwice/twice/shared/stripeprovider"
	bolt "go.etcd.io/bbolt"
)

// A payment that requires 3-D Secure answers with its client secret (pi_..._secret_...), a
// credential for the customer's browser. The real adapter's exchange with the simulator goes
// through the attempt log into the store: no byte of the store, and no log line, may hold it,
// while the attempt itself stays findable by the payment's id.
func TestClientSecretNeverReachesTheAttemptLog(t *testing.T) {
	sim, err := stripesim.New(stripesim.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim)
	t.Cleanup(func() { srv.Close(); sim.Close() })

	var logs bytes.Buffer
	logger := slog.New(redact.LogHandler(slog.NewJSONHandler(&logs, nil)))
	s, err := boltstore.Open(filepath.Join(t.TempDir(), "twice.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	l, err := attempts.NewLog(attempts.Log{Store: s, Now: clock.NewFake(time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)).Now})
	if err != nil {
		t.Fatal(err)
	}
	c, err := stripeprovider.New(stripeprovider.Client{APIKey: stripesim.DefaultAPIKey, BaseURL: srv.URL,
		Observer: attempts.StripeObserver{Record: attempts.BestEffort(l, logger)}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p, err := c.Create(ctx, provider.CreateRequest{Amount: 2000, Currency: "usd", PaymentMethod: "pm_card_threeDSecure2Required",
		IdempotencyKey: provider.IdempotencyKey("local", "3ds-secret")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	secret := p.ClientSecret.Reveal()
	if p.Status != provider.StatusRequiresAction || !strings.HasPrefix(secret, p.ID+"_secret_") {
		t.Fatalf("payment = %+v; want requires_action with a pi_..._secret_... client secret", p)
	}
	logger.Info("payment created", "payment", p, "client_secret", secret, "body", `{"client_secret":"`+secret+`"}`)

	page, err := l.Lookup(ctx, attempts.ByProviderPaymentID, p.ID, "")
	if err != nil || len(page.Attempts) != 2 {
		t.Fatalf("lookup: %d attempts, %v; want the create and the read", len(page.Attempts), err)
	}
	for _, sum := range page.Attempts {
		a, err := l.Get(ctx, sum.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(a.ResponseBody, `"status":"requires_action"`) || !strings.Contains(a.ResponseBody, `"client_secret":"`+redact.Redacted+`"`) {
			t.Errorf("%s response: %s; want the intent with its secret redacted", a.Operation, a.ResponseBody)
		}
	}
	// The whole store, every bucket and key, byte for byte.
	tail := secret[strings.Index(secret, "_secret_"):]
	err = s.DB().View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			return walk(b, func(k, v []byte) {
				if bytes.Contains(v, []byte(tail)) || bytes.Contains(k, []byte(tail)) {
					t.Errorf("bucket %s key %q holds the client secret", name, k)
				}
			})
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), tail) {
		t.Errorf("a log line holds the client secret: %s", logs.String())
	}
}

// walk visits every key and value of b and of its nested buckets.
func walk(b *bolt.Bucket, f func(k, v []byte)) error {
	return b.ForEach(func(k, v []byte) error {
		if v == nil {
			if nb := b.Bucket(k); nb != nil {
				return walk(nb, f)
			}
		}
		f(k, v)
		return nil
	})
}
