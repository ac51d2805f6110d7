package rie_test

import (
	"bytes"
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/golang-jwt/jwt/v5"
	"github.com/oauth2-proxy/mockoidc"

	"github.com/runtwice/twice/infra/rie"
	"github.com/runtwice/twice/shared/attempts"
	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/opsapi"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/recovery"
	"github.com/runtwice/twice/shared/store"
	"github.com/runtwice/twice/shared/webhooks/ingest"
)

// sweepRequest is one concrete request for a route pattern: what the sweep sends with each
// set of credentials. A form gets the session's CSRF token.
type sweepRequest struct {
	method, path string
	json         string
	form         url.Values
	header       map[string]string
	// want, when set, is the status the right credentials must get (the route works, not just
	// is reached).
	want int
}

// The access a route asks for, beyond opsapi's: the payments API (a JWT of the API's
// audience, no scope) and the webhook (its signature, no credentials).
const (
	accessPayments = "payments"
	accessWebhook  = "webhook"
)

// TestEveryRouteThroughTheGateway sends every route the handlers register (opsapi configured
// as functions/operator-api/main.go configures it, payments.Routes and ingest.Pattern) through
// the HTTP API as template.yaml declares it after the SAM transform (rie.HTTPAPIRoutes: each
// route's authorizer and scopes), to the real functions under the Lambda runtime emulator,
// three times: with no credentials, with the wrong ones (a valid JWT without the operations
// scope; for /payments, a JWT of another audience) and with the right ones (a JWT with the
// scope for the JSON API, a JWT of the API's audience for /payments, a console session for
// the console, nothing for public routes and the webhook). It fails when a route is
// unreachable with the right credentials (API Gateway's 401, 403 or 404, the function's 401,
// 403, redirect to sign-in or unknown path) or reachable without them. The table of statuses
// is the test's log.
func TestEveryRouteThroughTheGateway(t *testing.T) {
	e := setup(t)
	ctx := t.Context()
	st := e.store()

	idp, err := mockoidc.Run()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { idp.Shutdown() })
	idp.QueueUser(&mockoidc.MockUser{Subject: "op-sweep", Email: "sweep@example.com", Groups: []string{"twice-operators"}})
	keyParam, secretParam := e.consoleSecrets(t, idp.ClientSecret)

	const audience = "twice-api-sweep"
	routes, err := rie.HTTPAPIRoutes(ctx, e.root, "JwtIssuer="+idp.Issuer(), "JwtAudience="+audience, "OpsScope="+opsScope)
	if err != nil {
		t.Fatal(err)
	}
	gw := &rie.Gateway{Routes: routes, Verify: rie.JWTVerifier(oidc.NewRemoteKeySet(ctx, idp.JWKSEndpoint()))}
	srv := httptest.NewTLSServer(gw) // the session cookie is Secure
	t.Cleanup(srv.Close)
	gw.Functions = map[string]rie.Invoker{
		"operator-api": e.start(t, "operator-api", "TWICE_OIDC_ISSUER="+idp.Issuer(), "TWICE_OIDC_CLIENT_ID="+idp.ClientID,
			"TWICE_OIDC_CLIENT_SECRET_PARAM="+secretParam, "TWICE_OIDC_SCOPES=openid email groups", "TWICE_OPS_GROUP=twice-operators",
			"TWICE_OPS_SESSION_KEY_PARAM="+keyParam, "TWICE_OIDC_REDIRECT_URL="+srv.URL+"/ops/callback"),
		"payments-api":   e.start(t, "payments-api"),
		"webhook-ingest": e.start(t, "webhook-ingest"),
	}

	// The routes the code registers. operator-api's handler as its main configures it: the
	// dead-letter table, the attempt log, recoveries and steering (no on-demand reconcile).
	attemptLog, err := attempts.NewLog(attempts.Log{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	ops, err := opsapi.New(opsapi.Handler{Records: &deadletter.Records{Store: st}, Attempts: attemptLog,
		Payments: opsapi.StorePayments{Store: st}, Recoveries: opsapi.StorePayments{Store: st},
		Steer: &recovery.Steerer{Store: st}, Principal: func(*http.Request) (string, bool) { return "", false },
		OIDC: &opsapi.OIDCLogin{}})
	if err != nil {
		t.Fatal(err)
	}
	type registered struct{ pattern, access string }
	var all []registered
	for _, r := range ops.Routes() {
		all = append(all, registered{r.Pattern, r.Access.String()})
	}
	for _, p := range payments.Routes() {
		all = append(all, registered{p, accessPayments})
	}
	all = append(all, registered{ingest.Pattern, accessWebhook})

	// What the requests act on: dead letters, a payment with a timeline, running recoveries.
	now := time.Now().UTC()
	table := &deadletter.Records{Store: st}
	deadLetter := func(name string) string {
		rec, _, err := table.Open(ctx, deadletter.Record{Source: deadletter.SourceWebhook, Key: "webhook:stripe:evt_" + name,
			Cause: deadletter.CauseProcessing, EventID: "evt_" + name, Payload: json.RawMessage(`{"id":"evt_` + name + `"}`),
			Facts:  deadletter.Facts{EventID: "evt_" + name, Provider: "stripe", Deliveries: 5},
			Tries:  []deadletter.Try{{At: now, Error: "delivered 5 times without success"}},
			Target: deadletter.Target{Kind: deadletter.TargetQueue, Queue: e.fx.Prefix + "-webhooks", Body: json.RawMessage(`{"provider":"stripe","event_id":"evt_` + name + `"}`)}})
		if err != nil {
			t.Fatal(err)
		}
		return rec.ID
	}
	putAll := func(ws []store.Write, err error) {
		t.Helper()
		if err == nil {
			err = st.Transact(ctx, ws...)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	put := func(w store.Write, err error) { t.Helper(); putAll([]store.Write{w}, err) }
	for _, id := range []string{"pay_sweep_timeline", "pay_sweep_charge", "pay_sweep_stop", "pay_sweep_console"} {
		put(payments.Payment{ID: id, Status: provider.StatusDeclined, Amount: 2500, Currency: "usd", Customer: "cus_sweep",
			CreatedAt: now, UpdatedAt: now, Version: 1}.Put())
		if id != "pay_sweep_timeline" {
			putAll(payments.Recovery{PaymentID: id, State: payments.RecoveryScheduled, Round: 1, Attempts: 1,
				NextAttemptAt: now.Add(24 * time.Hour), Reason: "backoff", Amount: 2500, Currency: "usd",
				Explanation: "Retrying tomorrow.", Seq: 1}.Writes())
		}
	}
	dlView := deadLetter("sweep_view")
	const merchant, paymentKey = "svc-merchant", "sweep-payment-1"

	stripeBody := func() string {
		var ev events.APIGatewayV2HTTPRequest
		if err := json.Unmarshal(e.event(t, "webhook-ingest/stripe.json"), &ev); err != nil {
			t.Fatal(err)
		}
		return ev.Body
	}()
	signedStripe := func() map[string]string {
		ts := time.Now().Unix() // the function checks it against the wall clock
		mac := hmac.New(sha256.New, []byte(stripeWebhookSecret))
		fmt.Fprintf(mac, "%d.%s", ts, stripeBody)
		return map[string]string{"Content-Type": "application/json", "Stripe-Signature": fmt.Sprintf("t=%d,v1=%s", ts, hex.EncodeToString(mac.Sum(nil)))}
	}
	note := `{"note":"route sweep"}`
	examples := map[string][]sweepRequest{
		// The JSON API.
		"GET /ops/deadletters":                      {{method: "GET", path: "/ops/deadletters?status=open", want: 200}},
		"GET /ops/deadletters/{id}":                 {{method: "GET", path: "/ops/deadletters/" + dlView, want: 200}},
		"GET /ops/deadletters/{id}/audit":           {{method: "GET", path: "/ops/deadletters/" + dlView + "/audit", want: 200}},
		"POST /ops/deadletters/{id}/retry":          {{method: "POST", path: "/ops/deadletters/" + deadLetter("sweep_retry") + "/retry", json: note, want: 200}},
		"POST /ops/deadletters/{id}/override":       {{method: "POST", path: "/ops/deadletters/" + deadLetter("sweep_override") + "/override", json: `{"outcome":"succeeded","note":"route sweep"}`, want: 200}},
		"POST /ops/deadletters/{id}/resolve":        {{method: "POST", path: "/ops/deadletters/" + deadLetter("sweep_resolve") + "/resolve", json: note, want: 200}},
		"POST /ops/deadletters/{id}/ignore":         {{method: "POST", path: "/ops/deadletters/" + deadLetter("sweep_ignore") + "/ignore", json: note, want: 200}},
		"POST /ops/deadletters/retry":               {{method: "POST", path: "/ops/deadletters/retry?source=reconciliation", json: note}},
		"GET /ops/attempts":                         {{method: "GET", path: "/ops/attempts?payment_id=pay_sweep_timeline"}},
		"GET /ops/payments/{id}/timeline":           {{method: "GET", path: "/ops/payments/pay_sweep_timeline/timeline", want: 200}},
		"GET /ops/recoveries":                       {{method: "GET", path: "/ops/recoveries", want: 200}},
		"POST /ops/recoveries/{id}/{action}":        {{method: "POST", path: "/ops/recoveries/pay_sweep_charge/charge-now", json: note, want: 202}, {method: "POST", path: "/ops/recoveries/pay_sweep_stop/stop", json: note, want: 202}},
		"GET /ops/refused":                          {{method: "GET", path: "/ops/refused", want: 200}},
		"GET /ops/{$}":                              {{method: "GET", path: "/ops/", want: 200}},
		"GET /ops/records/{id}":                     {{method: "GET", path: "/ops/records/" + dlView, want: 200}},
		"GET /ops/lookup":                           {{method: "GET", path: "/ops/lookup", want: 200}},
		"GET /ops/payments/{id}":                    {{method: "GET", path: "/ops/payments/pay_sweep_timeline", want: 200}},
		"GET /ops/running":                          {{method: "GET", path: "/ops/running", want: 200}},
		"POST /ops/payments/{id}/recovery/{action}": {{method: "POST", path: "/ops/payments/pay_sweep_console/recovery/stop", form: url.Values{"note": {"route sweep"}}, want: 303}},
		"POST /ops/records/{id}/{action}":           {{method: "POST", path: "/ops/records/" + deadLetter("sweep_console") + "/resolve", form: url.Values{"note": {"route sweep"}}, want: 303}},
		"POST /ops/bulk-retry":                      {{method: "POST", path: "/ops/bulk-retry", form: url.Values{"source": {"reconciliation"}, "note": {"route sweep"}}}},
		"POST /ops/logout":                          {{method: "POST", path: "/ops/logout", form: url.Values{}, want: 303}},
		"GET /ops/login":                            {{method: "GET", path: "/ops/login"}},
		"GET /ops/callback":                         {{method: "GET", path: "/ops/callback"}},
		"GET /ops":                                  {{method: "GET", path: "/ops"}},
		"POST /ops/login":                           {{method: "POST", path: "/ops/login", form: url.Values{"token": {"x"}}}},
		// The payments API and the webhook.
		"POST /payments": {{method: "POST", path: "/payments", json: `{"amount":1500,"currency":"usd","customer":"cus_sweep","payment_method":"pm_card_visa"}`,
			header: map[string]string{"Idempotency-Key": paymentKey}, want: 201}},
		"GET /payments/{id}": {{method: "GET", path: "/payments/" + payments.PaymentID("jwt:"+merchant, paymentKey), want: 200}},
		"POST /payments/{id}/refunds": {{method: "POST", path: "/payments/" + payments.PaymentID("jwt:"+merchant, paymentKey) + "/refunds",
			json: `{"amount":500}`, header: map[string]string{"Idempotency-Key": "sweep-refund"}, want: 201}},
		// The payment above succeeded: the provider refuses to capture or cancel it, which
		// only the function (and the provider behind it) can say.
		"POST /payments/{id}/capture": {{method: "POST", path: "/payments/" + payments.PaymentID("jwt:"+merchant, paymentKey) + "/capture",
			header: map[string]string{"Idempotency-Key": "sweep-capture-1"}, want: 409}},
		"POST /payments/{id}/cancel": {{method: "POST", path: "/payments/" + payments.PaymentID("jwt:"+merchant, paymentKey) + "/cancel",
			json: `{"reason":"duplicate"}`, header: map[string]string{"Idempotency-Key": "sweep-cancel-1"}, want: 409}},
		"POST /webhooks/{provider}": {{method: "POST", path: "/webhooks/stripe", json: stripeBody, want: 200}},
	}

	// Credentials. Tokens the issuer signs; the console session from signing in through it.
	token := func(sub, aud, scope string) string {
		tok, err := idp.Keypair.SignJWT(jwt.MapClaims{"iss": idp.Issuer(), "aud": aud, "sub": sub, "scope": scope,
			"iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix()})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	opsToken := token("svc-ops", audience, "openid "+opsScope)
	noScopeToken := token("svc-ops", audience, "openid twice/payments")
	merchantToken := token(merchant, audience, "twice/payments")
	otherAudienceToken := token(merchant, "another-api", "twice/payments "+opsScope)

	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Transport: srv.Client().Transport, Jar: jar}
	// /ops/ -> /ops/login -> the issuer -> /ops/callback, whose page sends the browser on to
	// /ops/ (a meta refresh, so the SameSite=Strict cookie is sent): then the console's list.
	resp, err := browser.Get(srv.URL + "/ops/")
	if err == nil {
		resp.Body.Close()
		resp, err = browser.Get(srv.URL + "/ops/")
	}
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindSubmatch(page)
	if resp.StatusCode != http.StatusOK || m == nil {
		t.Fatalf("signing in through the issuer ended at %s with %d:\n%s", resp.Request.URL, resp.StatusCode, page)
	}
	csrf := string(m[1])
	noFollow := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	browser.CheckRedirect = noFollow
	anonymous := &http.Client{Transport: srv.Client().Transport, CheckRedirect: noFollow}

	type cell struct {
		status int
		by     string // "gateway" or "function"
		note   string // why the function refused: "to sign-in", "no such path"
		// signedOut: the function ended the session and sent the browser to sign in again.
		signedOut bool
	}
	send := func(c *http.Client, rq sweepRequest, bearer string) cell {
		t.Helper()
		var body io.Reader
		ctype := ""
		switch {
		case rq.form != nil:
			f := url.Values{"csrf": {csrf}}
			for k, v := range rq.form {
				f[k] = v
			}
			body, ctype = strings.NewReader(f.Encode()), "application/x-www-form-urlencoded"
		case rq.json != "":
			body, ctype = strings.NewReader(rq.json), "application/json"
		}
		req, err := http.NewRequestWithContext(ctx, rq.method, srv.URL+rq.path, body)
		if err != nil {
			t.Fatal(err)
		}
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		for k, v := range rq.header {
			req.Header.Set(k, v)
		}
		if rq.path == "/webhooks/stripe" {
			for k, v := range signedStripe() {
				req.Header.Set(k, v)
			}
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		out := cell{status: resp.StatusCode, by: "function"}
		switch {
		case rie.IsGatewayAnswer(resp.StatusCode, b):
			out.by = "gateway"
		case resp.Header.Get("Location") == "/ops/login" && signedOut(resp):
			out.signedOut = true // POST /ops/logout did its job
		case resp.Header.Get("Location") == "/ops/login":
			out.note = "to sign-in"
		case resp.StatusCode == http.StatusNotFound && string(b) == "404 page not found\n":
			out.note = "no such path"
		}
		return out
	}
	// refused: the call did not get past what guards the route.
	refused := func(c cell) bool {
		return c.by == "gateway" || c.note != "" || c.status == http.StatusUnauthorized || c.status == http.StatusForbidden
	}

	var out bytes.Buffer
	tw := tabwriter.NewWriter(&out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "route\taccess\tAPI Gateway route\tnone\twrong scope\tright")
	// Signing out ends the session the other console routes use: it goes last.
	slices.SortStableFunc(all, func(a, b registered) int {
		return cmp.Compare(bool2int(a.pattern == "POST /ops/logout"), bool2int(b.pattern == "POST /ops/logout"))
	})
	used := map[string]bool{} // the API Gateway routes the requests reached
	for _, r := range all {
		reqs, ok := examples[r.pattern]
		if !ok {
			t.Errorf("%s (%s): no example request in the sweep: add one", r.pattern, r.access)
			continue
		}
		for _, rq := range reqs {
			var none, wrong, right cell
			var noneOK, wrongOK bool
			switch r.access {
			case opsapi.Bearer.String():
				none, wrong, right = send(anonymous, rq, ""), send(anonymous, rq, noScopeToken), send(anonymous, rq, opsToken)
				noneOK = none.by == "gateway" && none.status == http.StatusUnauthorized
				wrongOK = wrong.by == "gateway" && wrong.status == http.StatusForbidden
			case opsapi.Session.String():
				none, wrong, right = send(anonymous, rq, ""), send(anonymous, rq, noScopeToken), send(browser, rq, "")
				noneOK, wrongOK = none.note == "to sign-in", wrong.note == "to sign-in"
			case accessPayments:
				none, wrong, right = send(anonymous, rq, ""), send(anonymous, rq, otherAudienceToken), send(anonymous, rq, merchantToken)
				noneOK = none.by == "gateway" && none.status == http.StatusUnauthorized
				wrongOK = wrong.by == "gateway" && wrong.status == http.StatusUnauthorized
			default: // public and the webhook: nothing to present
				none, wrong, right = send(anonymous, rq, ""), send(anonymous, rq, noScopeToken), send(anonymous, rq, "")
				noneOK, wrongOK = none.by == "function" && none.note == "", wrong.by == "function" && wrong.note == ""
			}
			rightOK := !refused(right) && (rq.want == 0 || right.status == rq.want)
			if r.access == opsapi.Public.String() || r.access == accessWebhook {
				rightOK = right.by == "function" && right.note == "" && (rq.want == 0 || right.status == rq.want)
			}
			route, _ := gwRoute(gw, rq)
			used[route] = true
			show := func(c cell, ok bool) string {
				s := fmt.Sprint(c.status)
				if c.by == "gateway" {
					s += " gateway"
				}
				if c.note != "" {
					s += " " + c.note
				}
				if c.signedOut {
					s += " signed out"
				}
				if !ok {
					s += " FAIL"
				}
				return s
			}
			fmt.Fprintf(tw, "%s %s\t%s\t%s\t%s\t%s\t%s\n", rq.method, strings.SplitN(rq.path, "?", 2)[0], r.access, route,
				show(none, noneOK), show(wrong, wrongOK), show(right, rightOK))
			if !noneOK || !wrongOK || !rightOK {
				t.Errorf("%s %s (%s, %s): none %+v, wrong %+v, right %+v", rq.method, rq.path, r.pattern, r.access, none, wrong, right)
			}
		}
	}
	tw.Flush()
	// And no route of the template is left over: each serves something the code registers.
	for _, r := range routes {
		if !used[r.Key()] {
			t.Errorf("template route %s (%s) serves no route the handlers register", r.Key(), r.Function)
		}
	}
	t.Logf("every route through the HTTP API (after the SAM transform) to the functions under the emulator:\n%s", out.String())
}

// gwRoute is the API Gateway route a request reaches.
func gwRoute(gw *rie.Gateway, rq sweepRequest) (string, bool) {
	r, ok := gw.Match(rq.method, strings.SplitN(rq.path, "?", 2)[0])
	return r.Key(), ok
}

// signedOut reports whether resp ends the console session (expires its cookie).
func signedOut(resp *http.Response) bool {
	for _, c := range resp.Cookies() {
		if c.Name == opsapi.CookieName && c.MaxAge < 0 {
			return true
		}
	}
	return false
}

func bool2int(b bool) int {
	if b {
		return 1
	}
	return 0
}
