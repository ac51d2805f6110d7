package payments

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"

	"github.com/runtwice/twice/infra/testenv"
	"github.com/runtwice/twice/shared/dynamo"
	"github.com/runtwice/twice/shared/idempotency"
	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/provider/providertest"
)

// dynamoPayments is the payments API on DynamoDB Local, its client running mw (a call or
// capacity counter): the store, the provider fake and a POST of a key and a payment method.
func dynamoPayments(t *testing.T, mw func(*middleware.Stack) error) (*dynamo.Store, *providertest.Fake, func(key, pm string) int) {
	t.Helper()
	client := testenv.DynamoDB(t, func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, mw) })
	st := dynamo.New(client, map[string]string{
		idempotency.Table: testenv.CreateTable(t, client, testenv.Schema{}),
		Table:             testenv.CreateTable(t, client, testenv.Schema{GSI1: true}),
		outbox.Table:      testenv.CreateTable(t, client, testenv.Schema{GSI1: true}),
	})
	now := func() time.Time { return created }
	quiet := slog.New(slog.DiscardHandler)
	k, err := idempotency.NewKeeper(idempotency.Keeper{Store: st, Now: now, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	prov := &providertest.Fake{Now: now}
	svc := &Service{Store: st, Keeper: k, Provider: prov, Now: now, Log: quiet}
	h := svc.Handler(func(*http.Request) string { return "local" })
	return st, prov, func(key, pm string) int {
		r := httptest.NewRequest("POST", "/payments", strings.NewReader(`{"amount":100,"currency":"usd","customer":"cus_1","payment_method":"`+pm+`"}`))
		r.Header.Set("Idempotency-Key", key)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
}

// TestDynamoDBCallsWithTheOutbox counts the SDK's calls per request on DynamoDB Local: the
// outbox message of a decline (start recovery) and of an unknown outcome (resolve) ride in the
// transaction the answer commits in, so a new key stays one conditional put plus one
// transaction, and a replay, or a repeat of a key another caller is resolving, one call. An
// answer that holds no charge (a decline, an unknown outcome) reads the payment first, so it
// never takes back a charge recorded while the call was out: one GetItem more.
func TestDynamoDBCallsWithTheOutbox(t *testing.T) {
	calls := &dynamo.CallCounter{}
	st, prov, post := dynamoPayments(t, calls.Middleware())
	expect := func(step string, code, wantCode int, want map[string]int) {
		t.Helper()
		if got := calls.Counts(); code != wantCode || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: %d, calls %v; want %d, %v", step, code, got, wantCode, want)
		}
		calls.Reset()
	}
	calls.Reset()
	expect("decline (payment, alias and recovery message in one transaction)", post("d", "pm_card_visa_chargeDeclinedInsufficientFunds"), 402,
		map[string]int{"GetItem": 1, "PutItem": 1, "TransactWriteItems": 1})
	expect("replay of the decline", post("d", "pm_card_visa_chargeDeclinedInsufficientFunds"), 402, map[string]int{"PutItem": 1})
	prov.FailNext(1, &provider.UnknownOutcomeError{Op: "create"}, true)
	expect("unknown outcome (pending key, payment and resolve message in one transaction)", post("u", "pm_card_visa"), 202,
		map[string]int{"GetItem": 1, "PutItem": 1, "TransactWriteItems": 1})
	if _, err := st.Get(t.Context(), outbox.Table, "recovery#"+PaymentID("local", "d")+"#r1", ""); err != nil {
		t.Fatalf("recovery message: %v", err)
	}
	if _, err := st.Get(t.Context(), outbox.Table, "resolve#"+PaymentID("local", "u")+"#1", ""); err != nil {
		t.Fatalf("resolve message: %v", err)
	}
}

// TestDynamoDBWriteUnitsPerPayment states what the payments API is billed per request on
// DynamoDB, as DynamoDB Local reports it (ReturnConsumedCapacity), with items under 1 KB: a new
// payment is the key's conditional put (1) plus one transaction of the key, the payment, the
// payment's gsi1 entry, its provider alias, and the change message for the event feed with its
// due-index entry (6 x 2); a busy provider releases the key in one conditional delete (1, was a
// 2-unit transaction before the single-write mode); a replay is the failed conditional put,
// which the error reports no units for (AWS bills it 1 per KB of the item, so 1).
// The attempt log's own transaction per provider call is not counted here (the fake provider
// logs nothing).
func TestDynamoDBWriteUnitsPerPayment(t *testing.T) {
	units := &dynamo.CapacityCounter{}
	_, prov, postPM := dynamoPayments(t, units.Middleware())
	post := func(key string) int { return postPM(key, "pm_card_visa") }
	expect := func(step string, code, wantCode int, want float64) {
		t.Helper()
		if got, _ := units.Units(); code != wantCode || got != want {
			t.Fatalf("%s: %d, %v write units; want %d, %v", step, code, got, wantCode, want)
		}
		units.Reset()
	}
	expect("new payment", post("n"), 201, 13)
	expect("replay", post("n"), 201, 0)
	prov.FailNext(1, &provider.ThrottledError{}, true)
	expect("provider busy: key released", post("b"), 503, 2)
}
