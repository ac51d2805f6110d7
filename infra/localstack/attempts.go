package localstack

import (
	"net/http"

	"github.com/runtwice/twice/shared/payments"
)

// paymentsOperation names an API call in the attempt log.
func paymentsOperation(r *http.Request) string {
	if r.Method == http.MethodPost {
		return "payments.create"
	}
	return "payments.retrieve"
}

// paymentOfRequest files an API call under its payment: a create under the id its scope and
// key derive (whatever the answer), a read under the id in its path.
func paymentOfRequest(r *http.Request, scope, key string) string {
	if id := r.PathValue("id"); id != "" {
		return id
	}
	if key == "" {
		return ""
	}
	return payments.PaymentID(scope, key)
}
