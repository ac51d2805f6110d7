package opsapi

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// OIDCLogin signs operators in to the console through an OpenID Connect issuer (Cognito's
// hosted UI, Okta, Auth0, ...): the authorization-code flow with PKCE (RFC 7636), the ID
// token verified by go-oidc (signature, issuer, audience, expiry, nonce), then the group claim
// checked. It ends in the console's own session cookie, whose actor is "oidc:" + the token's
// subject: the audit trail names who the issuer says signed in, not a typed name.
//
// The flow's state, PKCE verifier and nonce travel in a signed, short-lived cookie
// (SameSite=Lax: the issuer's redirect back is a cross-site navigation, which would not carry
// a Strict cookie), so any container can finish a login another one started.
type OIDCLogin struct {
	Issuer       string
	ClientID     string
	ClientSecret func(ctx context.Context) (string, error) // nil for a public client (PKCE only)
	// RedirectURL is the callback the issuer knows (https://API/ops/callback); empty: built
	// from the request's host, https.
	RedirectURL string
	Scopes      []string // default openid, email
	// GroupClaim names the claim holding the caller's groups ("groups"; Cognito:
	// "cognito:groups"), a list or a space-separated string; Group must be in it. Empty Group
	// admits every subject the issuer signs in.
	GroupClaim string
	Group      string
	// Client is the HTTP client for discovery, keys and the token exchange (default
	// http.DefaultClient).
	Client *http.Client

	mu       sync.Mutex
	provider *oidc.Provider // discovered on the first login, not at INIT
}

const (
	loginCookie = "twice_ops_login"
	loginTTL    = 10 * time.Minute
)

// ErrNotOperator: the issuer signed the caller in, but the token lacks the operators' group.
var ErrNotOperator = errors.New("opsapi: not in the operators group")

func (o *OIDCLogin) ctx(ctx context.Context) context.Context {
	if o.Client != nil {
		return oidc.ClientContext(ctx, o.Client)
	}
	return ctx
}

func (o *OIDCLogin) discover(ctx context.Context) (*oidc.Provider, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.provider != nil {
		return o.provider, nil
	}
	p, err := oidc.NewProvider(o.ctx(ctx), o.Issuer)
	if err != nil {
		return nil, err // not cached: the next login tries again
	}
	o.provider = p
	return p, nil
}

func (o *OIDCLogin) config(ctx context.Context, r *http.Request) (*oauth2.Config, *oidc.Provider, error) {
	p, err := o.discover(ctx)
	if err != nil {
		return nil, nil, err
	}
	secret := ""
	if o.ClientSecret != nil {
		if secret, err = o.ClientSecret(ctx); err != nil {
			return nil, nil, err
		}
	}
	redirect := o.RedirectURL
	if redirect == "" {
		redirect = "https://" + r.Host + "/ops/callback"
	}
	scopes := o.Scopes
	if len(scopes) == 0 {
		scopes = []string{oidc.ScopeOpenID, "email"}
	}
	return &oauth2.Config{ClientID: o.ClientID, ClientSecret: secret, Endpoint: p.Endpoint(), RedirectURL: redirect, Scopes: scopes}, p, nil
}

// start sends the browser to the issuer with a fresh state, nonce and PKCE challenge.
func (o *OIDCLogin) start(w http.ResponseWriter, r *http.Request, h *Handler) {
	ctx := r.Context()
	cfg, _, err := o.config(ctx, r)
	if err != nil {
		h.log().ErrorContext(ctx, "console login: issuer", "issuer", o.Issuer, "err", err)
		h.render(w, http.StatusBadGateway, loginView(view{Title: "Sign in", Error: "The identity provider cannot be reached. Try again in a minute."}))
		return
	}
	key, err := h.sessionKey(ctx)
	state, err2 := h.random(16)
	nonce, err3 := h.random(16)
	if err = errors.Join(err, err2, err3); err != nil {
		h.render(w, http.StatusInternalServerError, loginView(view{Title: "Sign in", Error: "Could not start a sign-in."}))
		return
	}
	verifier := oauth2.GenerateVerifier()
	exp := h.now().Add(loginTTL).Unix()
	payload := base64.RawURLEncoding.EncodeToString([]byte(state + "|" + nonce + "|" + verifier + "|" + strconv.FormatInt(exp, 10)))
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: payload + "." + mac(key, "login", payload), Path: "/ops",
		MaxAge: int(loginTTL / time.Second), HttpOnly: true, Secure: h.Secure, SameSite: http.SameSiteLaxMode})
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, cfg.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oidc.Nonce(nonce)), http.StatusSeeOther)
}

// callback is GET /ops/callback: the issuer's redirect back with a code.
func (h *Handler) callback(w http.ResponseWriter, r *http.Request) {
	o := h.OIDC
	if o == nil {
		h.render(w, http.StatusNotFound, errorView(view{Title: "Not found", Error: "Sign-in is by operator token here."}))
		return
	}
	ctx := r.Context()
	fail := func(status int, msg string) {
		http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: "", Path: "/ops", MaxAge: -1, HttpOnly: true, Secure: h.Secure, SameSite: http.SameSiteLaxMode})
		h.render(w, status, loginView(view{Title: "Sign in", Error: msg, LoginURL: "/ops/login"}))
	}
	q := r.URL.Query()
	if q.Get("error") != "" {
		fail(http.StatusUnauthorized, "The identity provider did not sign you in.")
		return
	}
	state, nonce, verifier, ok := h.loginState(r)
	if !ok || q.Get("code") == "" || subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(state)) != 1 {
		fail(http.StatusBadRequest, "This sign-in has expired or was started elsewhere. Sign in again.")
		return
	}
	cfg, p, err := o.config(ctx, r)
	if err != nil {
		h.log().ErrorContext(ctx, "console login: issuer", "issuer", o.Issuer, "err", err)
		fail(http.StatusBadGateway, "The identity provider cannot be reached. Try again in a minute.")
		return
	}
	tok, err := cfg.Exchange(o.ctx(ctx), q.Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		h.log().WarnContext(ctx, "console login: code exchange", "err", err)
		fail(http.StatusUnauthorized, "The identity provider did not accept this sign-in. Sign in again.")
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	idt, err := p.Verifier(&oidc.Config{ClientID: o.ClientID, Now: h.now}).Verify(o.ctx(ctx), raw)
	if err != nil || subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(nonce)) != 1 {
		h.log().WarnContext(ctx, "console login: id token", "err", err)
		fail(http.StatusUnauthorized, "The identity provider's answer could not be verified. Sign in again.")
		return
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil || !o.admits(claims) {
		h.log().WarnContext(ctx, "console login refused", "sub", idt.Subject, "err", ErrNotOperator)
		fail(http.StatusForbidden, "You are signed in, but not in the group allowed to operate twice.")
		return
	}
	actor := "oidc:" + actorName(idt.Subject)
	if err := h.startSession(w, r, actor); err != nil {
		fail(http.StatusInternalServerError, "Could not start a session.")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: "", Path: "/ops", MaxAge: -1, HttpOnly: true, Secure: h.Secure, SameSite: http.SameSiteLaxMode})
	h.log().InfoContext(ctx, "console login", "actor", actor, "issuer", idt.Issuer)
	// A page of our own, not a redirect: the navigation to /ops/ then starts on this site,
	// so the browser sends the new SameSite=Strict session with it.
	h.render(w, http.StatusOK, signedInView(view{Title: "Signed in"}))
}

// loginState reads and checks the signed login cookie.
func (h *Handler) loginState(r *http.Request) (state, nonce, verifier string, ok bool) {
	c, err := r.Cookie(loginCookie)
	if err != nil {
		return "", "", "", false
	}
	key, err := h.sessionKey(r.Context())
	if err != nil {
		return "", "", "", false
	}
	payload, sig, found := strings.Cut(c.Value, ".")
	if !found || subtle.ConstantTimeCompare([]byte(sig), []byte(mac(key, "login", payload))) != 1 {
		return "", "", "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(payload)
	parts := strings.Split(string(b), "|")
	if err != nil || len(parts) != 4 {
		return "", "", "", false
	}
	exp, err := strconv.ParseInt(parts[3], 10, 64)
	if err != nil || h.now().Unix() > exp {
		return "", "", "", false
	}
	return parts[0], parts[1], parts[2], true
}

// admits reports whether the token's claims carry the operators' group.
func (o *OIDCLogin) admits(claims map[string]any) bool {
	if o.Group == "" {
		return true
	}
	name := o.GroupClaim
	if name == "" {
		name = "groups"
	}
	switch v := claims[name].(type) {
	case []any:
		return slices.ContainsFunc(v, func(g any) bool { s, _ := g.(string); return s == o.Group })
	case string:
		return slices.Contains(strings.Fields(v), o.Group)
	}
	return false
}

// actorName keeps a subject printable and free of the session's separator.
func actorName(sub string) string {
	var b strings.Builder
	for _, r := range sub {
		if b.Len() >= 200 {
			break
		}
		if r > ' ' && r != '|' && r != 0x7f {
			b.WriteRune(r)
		}
	}
	if b.Len() == 0 {
		return "unknown"
	}
	return b.String()
}
