package payments

import (
	"net/http"
	"strings"
)

// APIOperation names a call of the payments API for the attempt log (attempts.Exchange).
func APIOperation(r *http.Request) string {
	if r.Method != http.MethodPost {
		return "payments.retrieve"
	}
	if strings.HasSuffix(r.URL.Path, "/refunds") {
		return "payments.refund"
	}
	switch _, op := pathParts(r); op {
	case opCapture, opCancel:
		return "payments." + op
	}
	return "payments.create"
}

// PaymentOfRequest files a payments API call under its payment for the attempt log: a create
// under the id its scope and key derive (whatever the answer), a read, capture or cancel under
// the id in its path. The path is read here, not from a router's PathValue: the Lambda wraps
// the handler before any router has matched it.
func PaymentOfRequest(r *http.Request, scope, key string) string {
	if id, _ := pathParts(r); id != "" {
		return id
	}
	if key == "" {
		return ""
	}
	return PaymentID(scope, key)
}

// pathParts splits /payments/{id}[/{op}].
func pathParts(r *http.Request) (id, op string) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/payments/")
	if !ok {
		return "", ""
	}
	id, op, _ = strings.Cut(rest, "/")
	return id, op
}
