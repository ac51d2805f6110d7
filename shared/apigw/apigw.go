package apigw

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runtwice/twice/shared/problem"
)

// ErrBadEvent: the event cannot be a request (an undecodable base64 body, a bad path).
var ErrBadEvent = errors.New("apigw: malformed HTTP API event")

type ctxKey struct{}

// RequestContext returns the API Gateway request context of a request Invoke built.
func RequestContext(ctx context.Context) (events.APIGatewayV2HTTPRequestContext, bool) {
	rc, ok := ctx.Value(ctxKey{}).(events.APIGatewayV2HTTPRequestContext)
	return rc, ok
}

// Scope names the authenticated caller of r: "jwt:" + the token's sub claim, or "iam:" + the
// caller's user ARN. The prefix keeps an IAM principal and a JWT subject that happen to be equal
// strings in different scopes. It is "" when API Gateway authenticated nobody (a route without
// an authorizer) or r did not come through Invoke.
func Scope(r *http.Request) string {
	rc, ok := RequestContext(r.Context())
	if !ok || rc.Authorizer == nil {
		return ""
	}
	a := rc.Authorizer
	if a.JWT != nil && a.JWT.Claims["sub"] != "" {
		return "jwt:" + a.JWT.Claims["sub"]
	}
	if a.IAM != nil && a.IAM.UserARN != "" {
		return "iam:" + a.IAM.UserARN
	}
	return ""
}

// RequireScope answers 401 (problem+json) to a request with no Scope, so a handler that keys
// records by caller never sees an anonymous one.
func RequireScope(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if Scope(r) == "" {
			problem.Write(w, problem.New(problem.Unauthorized, "This route needs an authenticated caller."))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Adapter is a Lambda handler for HTTP API (payload 2.0) events that serves them with an
// http.Handler, built as a literal: lambda.Start((&apigw.Adapter{Handler: h}).Invoke).
type Adapter struct{ Handler http.Handler }

// Invoke is the Lambda handler: pass it to lambda.Start. The request's context is the
// invocation's (so idempotency locks follow the Lambda deadline) and carries the API Gateway
// request context (Scope, RequestContext). A malformed event answers 400 without reaching h.
func (a *Adapter) Invoke(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	r, err := Request(ctx, ev)
	w := newResponseWriter()
	if err != nil {
		problem.Write(w, problem.New(problem.MalformedRequest, "The request could not be read."))
	} else {
		a.Handler.ServeHTTP(w, r)
	}
	return w.response(), nil
}

// Request converts an HTTP API event into the request API Gateway received. Header values
// stay as API Gateway joined them: splitting on commas (as some adapters do) would break
// values that contain commas, such as Stripe-Signature and webhook-signature.
func Request(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (*http.Request, error) {
	body := []byte(ev.Body)
	if ev.IsBase64Encoded {
		b, err := base64.StdEncoding.DecodeString(ev.Body)
		if err != nil {
			return nil, ErrBadEvent
		}
		body = b
	}
	path := ev.RawPath
	if path == "" {
		path = ev.RequestContext.HTTP.Path
	}
	u, err := url.ParseRequestURI(path)
	if err != nil || !strings.HasPrefix(path, "/") {
		return nil, ErrBadEvent
	}
	u.RawQuery = ev.RawQueryString
	method := ev.RequestContext.HTTP.Method
	if method == "" {
		return nil, ErrBadEvent
	}
	r, err := http.NewRequestWithContext(context.WithValue(ctx, ctxKey{}, ev.RequestContext), method, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, ErrBadEvent
	}
	for k, v := range ev.Headers {
		r.Header.Set(k, v)
	}
	if len(ev.Cookies) > 0 {
		r.Header.Set("Cookie", strings.Join(ev.Cookies, "; "))
	}
	r.Host = ev.RequestContext.DomainName
	if h := r.Header.Get("Host"); h != "" {
		r.Host = h
	}
	r.RemoteAddr = ev.RequestContext.HTTP.SourceIP
	r.RequestURI = u.RequestURI()
	return r, nil
}

// responseWriter buffers the response; Lambda returns it whole.
type responseWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func newResponseWriter() *responseWriter { return &responseWriter{header: http.Header{}} }

func (w *responseWriter) Header() http.Header { return w.header }

func (w *responseWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *responseWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(b)
}

func (w *responseWriter) response() events.APIGatewayV2HTTPResponse {
	w.WriteHeader(http.StatusOK)
	if w.header.Get("Content-Type") == "" && w.body.Len() > 0 {
		w.header.Set("Content-Type", http.DetectContentType(w.body.Bytes()))
	}
	resp := events.APIGatewayV2HTTPResponse{StatusCode: w.status, Headers: map[string]string{}, Cookies: w.header.Values("Set-Cookie")}
	for k, v := range w.header {
		if k != "Set-Cookie" {
			resp.Headers[k] = strings.Join(v, ",")
		}
	}
	if textual(w.header.Get("Content-Type")) {
		resp.Body = w.body.String()
	} else {
		resp.Body = base64.StdEncoding.EncodeToString(w.body.Bytes())
		resp.IsBase64Encoded = true
	}
	return resp
}

// textual reports whether a body of this type travels as text (JSON, HTML, problem+json...).
func textual(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return contentType == ""
	}
	return strings.HasPrefix(mt, "text/") || mt == "application/json" || strings.HasSuffix(mt, "+json") ||
		mt == "application/javascript" || mt == "image/svg+xml" || mt == "application/xml"
}
