package payments

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/runtwice/twice/infra/testenv"
	"github.com/runtwice/twice/shared/clock"
	"github.com/runtwice/twice/shared/dynamo"
	"github.com/runtwice/twice/shared/idempotency"
	"github.com/runtwice/twice/shared/lambdaenv"
	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/provider/providertest"
)

// TestDynamoDBThrottledPayment: POST /payments on DynamoDB Local while DynamoDB throttles,
// through the functions' retryer. Throttled at the first write (nothing done), the answer is a
// 503 problem with Retry-After; throttled at the transaction that records the charge (the
// provider charged), the answer is a 503 too and the key stays in progress until its lock
// expires. Either way a retry with the same key ends in one 201 and one charge.
func TestDynamoDBThrottledPayment(t *testing.T) {
	for name, op := range map[string]string{
		"at the key":         "DynamoDB_20120810.PutItem",
		"at the transaction": "DynamoDB_20120810.TransactWriteItems",
	} {
		t.Run(name, func(t *testing.T) {
			var throttling atomic.Bool
			throttling.Store(true)
			th := &testenv.Throttle{Throttles: func(_ int, target string) bool { return throttling.Load() && target == op }}
			cfg := testenv.DynamoDBConfig(t)
			cfg.HTTPClient = th
			cfg.Retryer = func() aws.Retryer {
				return lambdaenv.NewRetryer(lambdaenv.Retry{Backoff: retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) {
					return time.Millisecond, nil // the waits are the throttle tests' subject, not this one's
				})})
			}
			client := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
			plain := testenv.DynamoDB(t)
			st := dynamo.New(client, map[string]string{
				idempotency.Table: testenv.CreateTable(t, plain, testenv.Schema{}),
				Table:             testenv.CreateTable(t, plain, testenv.Schema{GSI1: true}),
				outbox.Table:      testenv.CreateTable(t, plain, testenv.Schema{GSI1: true}),
			})
			c := clock.NewFake(created)
			quiet := slog.New(slog.DiscardHandler)
			k, err := idempotency.NewKeeper(idempotency.Keeper{Store: st, Now: c.Now, Log: quiet})
			if err != nil {
				t.Fatal(err)
			}
			prov := &providertest.Fake{Now: c.Now}
			h := (&Service{Store: st, Keeper: k, Provider: prov, Now: c.Now, Log: quiet}).Handler(func(*http.Request) string { return "local" })
			post := func() *httptest.ResponseRecorder {
				r := httptest.NewRequest("POST", "/payments", strings.NewReader(`{"amount":100,"currency":"usd","customer":"cus_1","payment_method":"pm_card_visa"}`))
				r.Header.Set("Idempotency-Key", "throttled")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				return w
			}

			w := post()
			var p struct{ Type string }
			json.Unmarshal(w.Body.Bytes(), &p)
			if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" || !strings.HasSuffix(p.Type, "unavailable") {
				t.Fatalf("throttled: %d %v %s; want 503 unavailable with Retry-After", w.Code, w.Header(), w.Body)
			}
			n := 0
			for _, call := range th.Calls() {
				if call.Target == op {
					n++
				}
			}
			if n != lambdaenv.RetryMaxAttempts {
				t.Fatalf("%d %s calls, want %d", n, op, lambdaenv.RetryMaxAttempts)
			}

			throttling.Store(false)
			for i := 0; ; i++ {
				w = post()
				if w.Code == http.StatusCreated {
					break
				}
				if w.Code != http.StatusConflict || i > 10 {
					t.Fatalf("retry %d: %d %s", i, w.Code, w.Body)
				}
				c.Advance(10 * time.Second) // the key in progress: wait for its lock to expire
			}
			if prov.Len() != 1 {
				t.Fatalf("%d charges at the provider, want 1", prov.Len())
			}
		})
	}
}
