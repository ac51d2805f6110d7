package ingest_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/runtwice/twice/shared/webhooks"
	"github.com/runtwice/twice/shared/webhooks/ingest"
	"github.com/runtwice/twice/shared/webhooks/signature"
)

type printQueue struct{}

func (printQueue) Enqueue(_ context.Context, d webhooks.Delivery) error {
	fmt.Println("enqueued", d.Provider, d.EventID)
	return nil
}

func Example() {
	sv, _ := signature.NewStripeVerifier(signature.StripeVerifier{Secrets: []string{"whsec_local"}})
	mux := http.NewServeMux()
	mux.Handle(ingest.Pattern, &ingest.Handler{Verifiers: webhooks.Static{webhooks.ProviderStripe: sv}, Queue: printQueue{}})

	w := httptest.NewRecorder()
	mux.ServeHTTP(w, httptest.NewRequest("POST", "/webhooks/stripe", strings.NewReader(`{"id":"evt_1"}`)))
	fmt.Println(w.Code, w.Body.String())
	// Output:
	// 400 {"detail":"The webhook could not be verified.","status":400,"title":"Bad Request","type":"https://github.com/runtwice/twice/blob/main/README.md#problem-webhook-unverified"}
}
