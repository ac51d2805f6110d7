package rie

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// Route is one HTTP API route in front of a function: a method ("ANY" for all) and a path
// pattern as template.yaml writes it ("/ops", "/ops/{proxy+}", "/payments/{id}"), whether the
// JWT authorizer guards it, and the scopes it requires (a token needs one of them, in its
// space-separated "scope" claim).
type Route struct {
	Method, Path string
	JWT          bool
	Scopes       []string
}

// Gateway stands in for API Gateway's HTTP API in front of one function under the emulator:
// it picks the most specific route, runs the JWT authorizer on routes that have one (401
// {"message":"Unauthorized"} without a valid bearer token, 403 {"message":"Forbidden"} when
// the token lacks the route's scope, as API Gateway answers), turns the
// request into a payload 2.0 event, invokes the function and writes back its response,
// cookies included. It is what a browser test talks to.
type Gateway struct {
	Emulator *Emulator
	Routes   []Route
	// Verify checks a bearer token and returns its claims (the JWT authorizer: signature,
	// issuer, audience, expiry).
	Verify func(ctx context.Context, token string) (map[string]string, error)
}

// match returns the most specific route for method and path, as API Gateway picks it: an
// exact path beats one with {variables}, which beats a greedy {proxy+} one; a longer prefix
// beats a shorter one; a path with a trailing slash matches the route without it. score ranks
// the match (0: none), params are the path variables.
func (g *Gateway) match(method, path string) (best Route, params map[string]string, score int) {
	trimmed := strings.TrimSuffix(path, "/")
	for _, r := range g.Routes {
		if r.Method != "ANY" && r.Method != method {
			continue
		}
		if prefix, ok := strings.CutSuffix(r.Path, "{proxy+}"); ok {
			if strings.HasPrefix(path, prefix) && len(path) > len(prefix) && 1<<20+len(prefix) > score {
				best, params, score = r, map[string]string{"proxy": path[len(prefix):]}, 1<<20+len(prefix)
			}
			continue
		}
		if r.Path == path || r.Path == trimmed {
			return r, nil, 3 << 20 // exact
		}
		if vars, ok := matchVars(r.Path, trimmed); ok && 2<<20+len(r.Path) > score {
			best, params, score = r, vars, 2<<20+len(r.Path)
		}
	}
	return best, params, score
}

// matchVars matches a path against a pattern with {name} segments.
func matchVars(pattern, path string) (map[string]string, bool) {
	ps, xs := strings.Split(pattern, "/"), strings.Split(path, "/")
	if len(ps) != len(xs) || !strings.Contains(pattern, "{") {
		return nil, false
	}
	vars := map[string]string{}
	for i, p := range ps {
		if name, ok := strings.CutPrefix(p, "{"); ok && strings.HasSuffix(name, "}") && xs[i] != "" {
			vars[strings.TrimSuffix(name, "}")] = xs[i]
			continue
		}
		if p != xs[i] {
			return nil, false
		}
	}
	return vars, true
}

// API is one HTTP API in front of several functions, as template.yaml's HttpApi is: each
// request goes to the gateway with the most specific route for it.
type API []*Gateway

func (a API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var best *Gateway
	top := 0
	for _, g := range a {
		if _, _, score := g.match(r.Method, r.URL.Path); score > top {
			best, top = g, score
		}
	}
	if best == nil {
		notFound(w)
		return
	}
	best.ServeHTTP(w, r)
}

func notFound(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	io.WriteString(w, `{"message":"Not Found"}`)
}

func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	route, params, score := g.match(r.Method, r.URL.Path)
	if score == 0 {
		notFound(w)
		return
	}
	var auth *events.APIGatewayV2HTTPRequestContextAuthorizerDescription
	if route.JWT {
		tok, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		claims, err := map[string]string(nil), error(nil)
		if found && g.Verify != nil {
			claims, err = g.Verify(r.Context(), tok)
		}
		if !found || g.Verify == nil || err != nil {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Www-Authenticate", "Bearer")
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"message":"Unauthorized"}`)
			return
		}
		if len(route.Scopes) > 0 && !slices.ContainsFunc(strings.Fields(claims["scope"]), func(s string) bool { return slices.Contains(route.Scopes, s) }) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, `{"message":"Forbidden"}`)
			return
		}
		auth = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: claims}}
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 10<<20))
	if err != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	ev := events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: route.Method + " " + route.Path, RawPath: r.URL.Path, RawQueryString: r.URL.RawQuery,
		Headers: map[string]string{}, Body: base64.StdEncoding.EncodeToString(body), IsBase64Encoded: true, PathParameters: params,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey: route.Method + " " + route.Path, Stage: "$default", DomainName: r.Host, RequestID: time.Now().Format("150405.000000"),
			HTTP:       events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: r.Method, Path: r.URL.Path, Protocol: r.Proto, SourceIP: host(r.RemoteAddr), UserAgent: r.UserAgent()},
			Authorizer: auth,
		},
	}
	for k, v := range r.Header {
		if strings.EqualFold(k, "Cookie") {
			for _, c := range v {
				for part := range strings.SplitSeq(c, ";") {
					ev.Cookies = append(ev.Cookies, strings.TrimSpace(part))
				}
			}
			continue
		}
		ev.Headers[strings.ToLower(k)] = strings.Join(v, ",")
	}
	ev.Headers["host"] = r.Host
	payload, _ := json.Marshal(ev)
	out, err := g.Emulator.Invoke(r.Context(), payload)
	var resp events.APIGatewayV2HTTPResponse
	if err == nil {
		err = json.Unmarshal(out, &resp)
	}
	if err != nil || resp.StatusCode == 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, `{"message":"Internal Server Error"}`)
		return
	}
	for k, v := range resp.Headers {
		w.Header().Set(k, v)
	}
	for _, c := range resp.Cookies {
		w.Header().Add("Set-Cookie", c)
	}
	b := []byte(resp.Body)
	if resp.IsBase64Encoded {
		if b, err = base64.StdEncoding.DecodeString(resp.Body); err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
	}
	w.WriteHeader(resp.StatusCode)
	w.Write(b)
}

func host(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return h
}
