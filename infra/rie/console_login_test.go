package rie_test

import (
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/chromedp/chromedp"
	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/golang-jwt/jwt/v5"
	"github.com/oauth2-proxy/mockoidc"

	"github.com/runtwice/twice/infra/rie"
	"github.com/runtwice/twice/infra/testenv"
	"github.com/runtwice/twice/shared/deadletter"
)

// opsScope is the OpsScope the emulator tests deploy with: the scope an operator's JWT carries.
const opsScope = "twice/ops"

// TestConsoleLoginInAWS signs an operator in to the console the way it works in AWS:
// operator-api runs under the Lambda runtime interface emulator behind a stand-in for the HTTP
// API with template.yaml's routes (console routes without an authorizer, JSON routes with the
// JWT one), and the browser signs in through an OpenID Connect issuer (mockoidc) with the
// authorization-code flow and PKCE. The operator retries a dead letter; the audit names the
// issuer's subject.
func TestConsoleLoginInAWS(t *testing.T) {
	testenv.Chromium(t) // fails or skips before any server starts
	e := setup(t)
	ctx := t.Context()

	idp, err := mockoidc.Run()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { idp.Shutdown() })
	idp.QueueUser(&mockoidc.MockUser{Subject: "op-ada-7", Email: "ada@example.com", Groups: []string{"twice-operators"}})

	// The secrets an operator puts in SSM before the first deploy.
	keyParam, secretParam := e.consoleSecrets(t, idp.ClientSecret)

	// A dead webhook delivery whose retry goes back to the fixture's webhook queue.
	table := &deadletter.Records{Store: e.store()}
	rec, _, err := table.Open(ctx, deadletter.Record{Source: deadletter.SourceWebhook, Key: "webhook:stripe:evt_browser",
		Cause: deadletter.CauseProcessing, EventID: "evt_browser", Payload: json.RawMessage(`{"id":"evt_browser"}`),
		Facts:  deadletter.Facts{EventID: "evt_browser", Provider: "stripe", Deliveries: 5},
		Tries:  []deadletter.Try{{At: time.Unix(1795939200, 0).UTC(), Error: "delivered 5 times without success"}},
		Target: deadletter.Target{Kind: deadletter.TargetQueue, Queue: e.fx.Prefix + "-webhooks", Body: json.RawMessage(`{"provider":"stripe","event_id":"evt_browser"}`)}})
	if err != nil {
		t.Fatal(err)
	}

	// The API's routes after the SAM transform, its JWT authorizer trusting the same issuer's
	// tokens for the console's client.
	routes, err := rie.HTTPAPIRoutes(ctx, e.root, "JwtIssuer="+idp.Issuer(), "JwtAudience="+idp.ClientID, "OpsScope="+opsScope)
	if err != nil {
		t.Fatal(err)
	}
	gw := &rie.Gateway{Routes: routes, Verify: rie.JWTVerifier(oidc.NewRemoteKeySet(ctx, idp.JWKSEndpoint()))}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	operatorAPI := e.start(t, "operator-api", "TWICE_OIDC_ISSUER="+idp.Issuer(), "TWICE_OIDC_CLIENT_ID="+idp.ClientID,
		"TWICE_OIDC_CLIENT_SECRET_PARAM="+secretParam, "TWICE_OIDC_SCOPES=openid email groups", "TWICE_OPS_GROUP=twice-operators",
		"TWICE_OPS_SESSION_KEY_PARAM="+keyParam, "TWICE_OIDC_REDIRECT_URL="+srv.URL+"/ops/callback")
	gw.Functions = map[string]rie.Invoker{"operator-api": operatorAPI}

	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	t.Run("no session: redirected to sign in, then to the issuer with PKCE", func(t *testing.T) {
		resp, err := noFollow.Get(srv.URL + "/ops/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ops/login" {
			t.Fatalf("GET /ops/: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
		}
		resp, err = noFollow.Get(srv.URL + "/ops/login")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		to, err := url.Parse(resp.Header.Get("Location"))
		if err != nil || resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(to.String(), idp.AuthorizationEndpoint()) ||
			to.Query().Get("code_challenge_method") != "S256" || to.Query().Get("code_challenge") == "" ||
			to.Query().Get("state") == "" || to.Query().Get("nonce") == "" {
			t.Fatalf("GET /ops/login: %d to %s", resp.StatusCode, to)
		}
	})
	t.Run("JSON API without a JWT: 401 from the authorizer", func(t *testing.T) {
		resp, err := http.Get(srv.URL + "/ops/deadletters")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("GET /ops/deadletters: %d", resp.StatusCode)
		}
	})

	t.Run("JSON API with the issuer's JWT: the authorizer's subject is the caller", func(t *testing.T) {
		tok, err := idp.Keypair.SignJWT(jwt.MapClaims{"iss": idp.Issuer(), "aud": idp.ClientID, "sub": "svc-ops",
			"scope": opsScope, "iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix()})
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/ops/deadletters?status=open", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var page struct{ Records []struct{ ID string } }
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || err != nil || len(page.Records) == 0 {
			t.Fatalf("GET /ops/deadletters with a JWT: %d %+v (%v)", resp.StatusCode, page, err)
		}
	})

	br := testenv.NewBrowser(t, 90*time.Second)
	step := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(br.Ctx, steps...); err != nil {
			t.Fatalf("browser, %s: %v\noperator-api output:\n%s", what, err, operatorAPI.Output())
		}
	}
	text := br.Text
	// /ops/ -> /ops/login -> the issuer -> /ops/callback -> /ops/, signed in.
	step("sign in through the issuer", chromedp.Navigate(srv.URL+"/ops/"), chromedp.WaitVisible(`#records`))
	if list := text("#records"); !strings.Contains(list, rec.ID) {
		t.Fatalf("the list lacks %s: %s", rec.ID, list)
	}
	step("open the record", chromedp.Click(`#records a`), chromedp.WaitVisible(`#retry`))
	step("retry", chromedp.Click(`#retry`), chromedp.WaitVisible(`div.msg.ok`))
	status, audit := text("#status"), text("#audit")
	if strings.TrimSpace(status) != "retrying" || !strings.Contains(audit, "oidc:op-ada-7") || !strings.Contains(audit, "retry") {
		t.Fatalf("status %q, audit %q: want retrying, by oidc:op-ada-7", status, audit)
	}
	got, err := table.Get(ctx, rec.ID)
	if err != nil || got.Audit[len(got.Audit)-1].Actor != "oidc:op-ada-7" {
		t.Fatalf("stored audit %+v (%v)", got.Audit, err)
	}
	// operator-api sent nothing itself: the retry is an outbox message committed with the
	// record, and outbox-relay (handed it as the outbox stream hands it) puts the delivery back
	// on the webhook queue with the retry's attributes, for the worker to close the loop.
	retryID := deadletter.RetryID(rec.ID, got.Retries)
	e.relayOutbox(t, e.start(t, "outbox-relay"), deadletter.RetryMessageID(retryID))
	q := sqs.NewFromConfig(e.fx.MotoConfig)
	msgs, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(e.fx.QueueURLs["webhooks"]),
		MaxNumberOfMessages: 10, WaitTimeSeconds: 1, MessageAttributeNames: []string{"All"}})
	if err != nil {
		t.Fatal(err)
	}
	var requeued []string
	for _, m := range msgs.Messages {
		if a, ok := m.MessageAttributes[deadletter.AttrRetryID]; ok && aws.ToString(a.StringValue) == retryID {
			requeued = append(requeued, aws.ToString(m.Body))
		}
	}
	if len(requeued) != 1 || requeued[0] != `{"provider":"stripe","event_id":"evt_browser"}` {
		t.Fatalf("retried deliveries on the webhook queue: %q (of %d messages)", requeued, len(msgs.Messages))
	}

	// The queue is empty now: the issuer signs in its default user, who is not in the group.
	t.Run("signed in but not an operator: 403, no session", func(t *testing.T) {
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Jar: jar}
		resp, err := c.Get(srv.URL + "/ops/login")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		u, _ := url.Parse(srv.URL + "/ops/")
		for _, ck := range jar.Cookies(u) {
			if ck.Name == "twice_ops" {
				t.Errorf("a session was set for a non-operator")
			}
		}
		if resp.StatusCode != http.StatusForbidden || resp.Request.URL.Path != "/ops/callback" {
			t.Fatalf("ended at %s with %d, want 403 at the callback", resp.Request.URL.Path, resp.StatusCode)
		}
	})
}

// consoleSecrets stores the console's session key and the OIDC client secret in SSM, as an
// operator does before the first deploy, and returns their names.
func (e *env) consoleSecrets(t *testing.T, clientSecret string) (keyParam, secretParam string) {
	t.Helper()
	keyParam, secretParam = "/"+e.fx.Prefix+"/ops-session-key", "/"+e.fx.Prefix+"/oidc-client-secret"
	e.putSecret(t, keyParam, "k3y-for-the-console-sessions-0123456789abcdef")
	e.putSecret(t, secretParam, clientSecret)
	return keyParam, secretParam
}

func (e *env) putSecret(t *testing.T, name, value string) {
	t.Helper()
	if _, err := ssm.NewFromConfig(e.fx.MotoConfig).PutParameter(t.Context(), &ssm.PutParameterInput{Name: aws.String(name),
		Value: aws.String(value), Type: ssmtypes.ParameterTypeSecureString, Overwrite: aws.Bool(true)}); err != nil {
		t.Fatal(err)
	}
}
