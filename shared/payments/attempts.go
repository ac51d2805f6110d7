package payments

import (
	"net/http"
	"strings"
)

// APIOperation names a call of the payments API for the attempt log (attempts.API).
func APIOperation(r *http.Request) string {
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/refunds") {
		return "payments.refund"
	}
	if r.Method == http.MethodPost {
		return "payments.create"
	}
	return "payments.retrieve"
}

// PaymentOfRequest files a payments API call under its payment for the attempt log: a create
// under the id its scope and key derive (whatever the answer), a read under the id in its path.
func PaymentOfRequest(r *http.Request, scope, key string) string {
	if id := r.PathValue("id"); id != "" {
		return id
	}
	if key == "" {
		return ""
	}
	return PaymentID(scope, key)
}
