package stripeprovider_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/secrets"
	"github.com/runtwice/twice/shared/stripeprovider"
)

// keyEcho answers a PaymentIntent retrieve and remembers the bearer key of each call.
type keyEcho struct {
	mu   sync.Mutex
	keys []string
}

func (k *keyEcho) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	k.mu.Lock()
	k.keys = append(k.keys, strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
	k.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"id": "pi_1", "object": "payment_intent", "status": "succeeded", "amount": 100, "currency": "usd"})
}

func TestSecretKeyedReadsKeyOnUseAndFollowsRotation(t *testing.T) {
	echo := &keyEcho{}
	srv := httptest.NewServer(echo)
	defer srv.Close()
	src := secrets.Static{"stripe-key": {"sk_test_one"}}
	p := &stripeprovider.SecretKeyed{Source: src, Name: "stripe-key", Client: stripeprovider.Client{BaseURL: srv.URL}}
	if len(echo.keys) != 0 {
		t.Fatal("constructor made a call")
	}
	ctx := context.Background()
	if _, err := p.Get(ctx, "pi_1"); err != nil {
		t.Fatal(err)
	}
	src["stripe-key"] = []string{"sk_test_two", "sk_test_one"}
	if _, err := p.Get(ctx, "pi_1"); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(echo.keys, ","); got != "sk_test_one,sk_test_two" {
		t.Fatalf("keys sent %q", got)
	}

	missing := &stripeprovider.SecretKeyed{Source: src, Name: "absent", Client: stripeprovider.Client{BaseURL: srv.URL}}
	_, err := missing.Get(ctx, "pi_1")
	var te *provider.TransientError
	if !errors.As(err, &te) || !errors.Is(err, secrets.ErrNotFound) {
		t.Fatalf("missing key: %v, want a TransientError wrapping secrets.ErrNotFound", err)
	}
	for _, err := range missing.List(ctx, provider.ListParams{}) {
		if !errors.As(err, &te) {
			t.Fatalf("List: %v", err)
		}
	}
}
