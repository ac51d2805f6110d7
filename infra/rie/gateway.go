package rie

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/coreos/go-oidc/v3/oidc"
)

// Route is one HTTP API route as API Gateway holds it after the SAM transform: a method ("ANY"
// for all) and a path as the template writes it ("/ops", "/ops/{proxy+}",
// "/ops/recoveries/{id}/{action}", or "$default"), the function it integrates (its name after
// the stage: "operator-api"), and its authorizer ("" for none) with the JWT configuration and
// the route's authorization scopes.
type Route struct {
	Method     string   `json:"method"`
	Path       string   `json:"path"`
	Function   string   `json:"function"`
	Authorizer string   `json:"authorizer"`
	Scopes     []string `json:"scopes"`
	Issuer     string   `json:"issuer"`
	Audience   []string `json:"audience"`
}

// Key is the route key API Gateway names the route by ("GET /ops/attempts").
func (r Route) Key() string {
	if r.Path == "$default" {
		return r.Path
	}
	return r.Method + " " + r.Path
}

// HTTPAPIRoutes reads the HTTP API's routes from template.yaml (under root, the module root)
// after the SAM transform, as API Gateway receives them (rehearsal/routes.py runs
// aws-sam-translator, as the deploy rehearsal does). params ("Name=Value") set template
// parameters: JwtIssuer and JwtAudience have no default.
func HTTPAPIRoutes(ctx context.Context, root string, params ...string) ([]Route, error) {
	args := []string{filepath.Join(root, "infra", "rie", "rehearsal", "routes.py"), "--template", filepath.Join(root, "template.yaml")}
	for _, p := range params {
		args = append(args, "--param", p)
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "python3", args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("rie: routes.py: %w: %s", err, stderr.String())
	}
	var routes []Route
	if err := json.Unmarshal(out, &routes); err != nil {
		return nil, fmt.Errorf("rie: routes.py: %w", err)
	}
	if len(routes) == 0 {
		return nil, errors.New("rie: the template has no HTTP API routes")
	}
	return routes, nil
}

// Invoker runs a function on one event payload and returns its response payload (an
// Emulator).
type Invoker interface {
	Invoke(ctx context.Context, payload []byte) ([]byte, error)
}

var _ Invoker = (*Emulator)(nil)

// Gateway stands in for API Gateway's HTTP API in front of the functions under the emulator:
// it picks the route as HTTP APIs do (Match), runs the route's JWT authorizer (401
// {"message":"Unauthorized"} without a valid bearer token, 403 {"message":"Forbidden"} when
// the token lacks every one of the route's scopes, as API Gateway answers), turns the request
// into a payload 2.0 event, invokes the route's function and writes back its response,
// cookies included. It is what a browser or a route sweep talks to.
type Gateway struct {
	Routes []Route
	// Functions invoke each route's function, by Route.Function.
	Functions map[string]Invoker
	// Verify checks a bearer token as route's JWT authorizer does (signature, expiry, the
	// route's issuer and audience) and returns its claims; JWTVerifier builds one.
	Verify func(ctx context.Context, route Route, token string) (map[string]any, error)
}

// Match returns the route API Gateway picks for method and path: the most specific path
// (compared segment by segment from the left: a literal beats a {variable}, which beats a
// greedy {proxy+}), then a route of the method over ANY, and $default last. A path with a
// trailing slash matches the route without it.
func (g *Gateway) Match(method, path string) (Route, bool) {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	var best Route
	var bestRank []int
	found := false
	for _, r := range g.Routes {
		if r.Method != "ANY" && r.Method != method {
			continue
		}
		rank, ok := pathRank(r.Path, segs)
		if !ok {
			continue
		}
		if r.Method != "ANY" {
			rank = append(rank, 1)
		} else {
			rank = append(rank, 0)
		}
		if !found || slices.Compare(rank, bestRank) > 0 {
			best, bestRank, found = r, rank, true
		}
	}
	return best, found
}

// pathRank reports whether route pattern p matches the request path's segments and, if it
// does, its specificity: one number per segment (3 literal, 2 variable, 1 greedy); $default
// ranks below every path.
func pathRank(p string, segs []string) ([]int, bool) {
	if p == "$default" {
		return []int{0}, true
	}
	ps := strings.Split(strings.Trim(p, "/"), "/")
	var rank []int
	for i, s := range ps {
		switch {
		case strings.HasPrefix(s, "{") && strings.HasSuffix(s, "+}"):
			if i != len(ps)-1 || len(segs) <= i || segs[i] == "" {
				return nil, false
			}
			return append(rank, 1), true
		case i >= len(segs):
			return nil, false
		case strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}"):
			if segs[i] == "" {
				return nil, false
			}
			rank = append(rank, 2)
		case s != segs[i]:
			return nil, false
		default:
			rank = append(rank, 3)
		}
	}
	return rank, len(ps) == len(segs)
}

// gatewayAnswer writes one of API Gateway's own answers ({"message":"Not Found"}).
func gatewayAnswer(w http.ResponseWriter, status int) {
	w.Header().Set("Content-Type", "application/json")
	if status == http.StatusUnauthorized {
		w.Header().Set("Www-Authenticate", "Bearer")
	}
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"message":%q}`, http.StatusText(status))
}

// IsGatewayAnswer reports whether a response is one of API Gateway's own refusals (401, 403,
// 404, 500 with {"message": ...}) rather than the function's.
func IsGatewayAnswer(status int, body []byte) bool {
	return string(body) == fmt.Sprintf(`{"message":%q}`, http.StatusText(status))
}

// authorize runs route's authorizer on r: the JWT's claims and the scopes it was let in
// with, or the status API Gateway answers (401, 403).
func (g *Gateway) authorize(r *http.Request, route Route) (map[string]any, []string, int) {
	tok, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !found || tok == "" || g.Verify == nil {
		return nil, nil, http.StatusUnauthorized
	}
	claims, err := g.Verify(r.Context(), route, tok)
	if err != nil {
		return nil, nil, http.StatusUnauthorized
	}
	if len(route.Scopes) == 0 {
		return claims, nil, 0
	}
	// The token must carry at least one of the route's scopes, in "scope" (space-separated)
	// or "scp" (a list or a space-separated string).
	have := tokenScopes(claims)
	for _, s := range route.Scopes {
		if slices.Contains(have, s) {
			return claims, have, 0
		}
	}
	return nil, nil, http.StatusForbidden
}

func tokenScopes(claims map[string]any) []string {
	var out []string
	for _, k := range []string{"scope", "scp"} {
		switch v := claims[k].(type) {
		case string:
			out = append(out, strings.Fields(v)...)
		case []any:
			for _, s := range v {
				if s, ok := s.(string); ok {
					out = append(out, s)
				}
			}
		}
	}
	return out
}

// eventClaims is claims as API Gateway passes them to the function: strings, a list as
// "[a b]".
func eventClaims(claims map[string]any) map[string]string {
	out := map[string]string{}
	for k, v := range claims {
		switch v := v.(type) {
		case string:
			out[k] = v
		case []any:
			parts := make([]string, len(v))
			for i, p := range v {
				parts[i] = fmt.Sprint(p)
			}
			out[k] = "[" + strings.Join(parts, " ") + "]"
		case float64:
			out[k] = fmt.Sprint(int64(v))
		default:
			out[k] = fmt.Sprint(v)
		}
	}
	return out
}

func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	route, ok := g.Match(r.Method, r.URL.Path)
	if !ok {
		gatewayAnswer(w, http.StatusNotFound)
		return
	}
	var auth *events.APIGatewayV2HTTPRequestContextAuthorizerDescription
	if route.Authorizer != "" {
		claims, scopes, status := g.authorize(r, route)
		if status != 0 {
			gatewayAnswer(w, status)
			return
		}
		auth = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: eventClaims(claims), Scopes: scopes}}
	}
	fn := g.Functions[route.Function]
	if fn == nil {
		gatewayAnswer(w, http.StatusInternalServerError)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 10<<20))
	if err != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	ev := events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: route.Key(), RawPath: r.URL.Path, RawQueryString: r.URL.RawQuery,
		Headers: map[string]string{}, Body: base64.StdEncoding.EncodeToString(body), IsBase64Encoded: true,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey: route.Key(), Stage: "$default", DomainName: r.Host, RequestID: time.Now().Format("150405.000000"),
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
	out, err := fn.Invoke(r.Context(), payload)
	var resp events.APIGatewayV2HTTPResponse
	if err == nil {
		err = json.Unmarshal(out, &resp)
	}
	if err != nil || resp.StatusCode == 0 {
		gatewayAnswer(w, http.StatusInternalServerError)
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

// JWTVerifier is Gateway.Verify for tokens signed with keys (an issuer's JWKS): what an HTTP
// API's JWT authorizer checks, the signature, expiry (and not-before), that iss is the
// route's issuer, and that aud holds one of the route's audiences or, for a token without aud
// (a Cognito access token), that its client_id is one (API Gateway validates client_id only if
// aud is not present).
func JWTVerifier(keys oidc.KeySet) func(ctx context.Context, route Route, token string) (map[string]any, error) {
	return func(ctx context.Context, route Route, token string) (map[string]any, error) {
		if len(route.Audience) == 0 {
			return nil, errors.New("rie: the route's authorizer has no audience")
		}
		idt, err := oidc.NewVerifier(route.Issuer, keys, &oidc.Config{SkipClientIDCheck: true}).Verify(ctx, token)
		if err != nil {
			return nil, err
		}
		var claims map[string]any
		if err := idt.Claims(&claims); err != nil {
			return nil, err
		}
		for _, aud := range route.Audience {
			if slices.Contains(idt.Audience, aud) {
				return claims, nil
			}
		}
		if clientID, _ := claims["client_id"].(string); len(idt.Audience) == 0 && slices.Contains(route.Audience, clientID) {
			return claims, nil
		}
		return nil, errors.New("rie: the token's aud (or, without aud, client_id) is none of the route's audiences")
	}
}

func host(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return h
}
