// Package opsapi is the operator API and console under /ops.
//
// JSON API (Authorization: Bearer TWICE_OPERATOR_TOKEN locally; in AWS the API Gateway
// authorizer and Config.Principal):
//
//	GET  /ops/deadletters?status=&source=&class=&from=&to=&q=&limit=&cursor=
//	GET  /ops/deadletters/{id}          the record, with attempts and audit trail
//	GET  /ops/deadletters/{id}/audit
//	POST /ops/deadletters/{id}/retry    {"note"}            -> {"retried": bool, "record"}
//	POST /ops/deadletters/{id}/override {"outcome","note"}  both required, else 400
//	POST /ops/deadletters/{id}/resolve  {"note"}
//	POST /ops/deadletters/{id}/ignore   {"note"}
//	POST /ops/deadletters/retry?filter  {"note"}            bulk retry -> counts
//	GET  /ops/attempts?idempotency_key=|payment_id=|event_id=
//
// Errors are problem+json: 401 without a valid token, 400 for a bad filter or body, 404 for
// an unknown id, 409 for an action the record's status does not allow, 502 when a retry could
// not be sent. Internal error text is logged, never returned.
//
// The console (GET /ops/) is server-rendered HTML with no JavaScript: the list with filters
// and an inline SVG chart of the open count over 48 hours, the detail with attempts, audit
// trail and payload, the action forms, and the attempt lookup. Browsers cannot attach a bearer
// token to a plain link, so /ops/login takes the token once and sets an HttpOnly,
// SameSite=Strict cookie holding an HMAC-signed session (nonce, expiry, the operator's name
// for the audit trail), never the token itself. Every form carries a CSRF token derived from
// the session nonce, and every POST checks it. Behind an authorizer (Principal set), the
// session is the principal and the CSRF token derives from it and SessionKey.
//
// In AWS (Config.OIDC set) /ops/login sends the browser to an OpenID Connect issuer instead:
// the authorization-code flow with PKCE, state and nonce, back to GET /ops/callback, where the
// ID token is verified (go-oidc) and its group claim checked; the session is the same cookie,
// its actor "oidc:" + the token's subject. SessionKeySource supplies the key there, a secret,
// since the cookie is then the only credential a page request carries.
//
// The pages are templ components (console.templ, compiled to console_templ.go by
// go generate), not html/template: text/template's method lookup by name at run time would
// make the linker keep every exported method of every reachable type in the Lambda binary.
package opsapi
