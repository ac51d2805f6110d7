package opsapi

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/runtwice/twice/shared/attempts"
	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/problem"
	"github.com/runtwice/twice/shared/recon"
)

// Records is what the operator API needs of the dead-letter table.
type Records interface {
	Get(ctx context.Context, id string) (deadletter.Record, error)
	List(ctx context.Context, f deadletter.Filter) (deadletter.Page, error)
	Retry(ctx context.Context, id, actor, note string) (deadletter.Record, bool, error)
	RetrySeen(ctx context.Context, id, actor, note string, seen int) (deadletter.Record, bool, error)
	Override(ctx context.Context, id, actor, result, note string) (deadletter.Record, error)
	MarkResolved(ctx context.Context, id, actor, note string) (deadletter.Record, error)
	Ignore(ctx context.Context, id, actor, note string) (deadletter.Record, error)
	BulkRetry(ctx context.Context, f deadletter.Filter, actor, note string) (deadletter.BulkResult, error)
	OpenCount(ctx context.Context) (int64, error)
	OpenHistory(ctx context.Context, hours int) ([]deadletter.HourCount, error)
}

var _ Records = (*deadletter.Records)(nil)

// Attempts answers "was this delivered?".
type Attempts interface {
	Lookup(ctx context.Context, by attempts.By, value, cursor string) (attempts.Page, error)
	// LookupKey finds the requests a caller made with its own Idempotency-Key, in its scope.
	LookupKey(ctx context.Context, scope, key, cursor string) (attempts.Page, error)
}

var _ Attempts = (*attempts.Log)(nil)

// Reconciler runs a reconciliation (recon.Reconciler.Handle).
type Reconciler interface {
	Handle(ctx context.Context, input json.RawMessage) (recon.Report, error)
}

// Handler serves the operator API and the console under /ops. Build it with New, which
// checks it and registers the routes once; Now defaults to time.Now, Log to slog.Default().
type Handler struct {
	Records  Records
	Attempts Attempts
	// Token is the operator bearer token (TWICE_OPERATOR_TOKEN locally). Requests carrying
	// "Authorization: Bearer <Token>" are the operator "operator", or "operator:NAME" when they
	// name their person in the OperatorHeader (twicectl --as NAME).
	Token string
	// Principal, when set, names the caller from the request: in AWS the API Gateway
	// authorizer has already checked it (a JWT's sub, an IAM ARN). It is tried before Token.
	Principal func(*http.Request) (string, bool)
	// SessionKey signs console sessions and CSRF tokens; default: derived from Token.
	SessionKey []byte
	// SessionKeySource, when set, supplies the session key instead (a secret read on first
	// use, as in AWS where a session cookie is the credential): at least 16 bytes.
	SessionKeySource func(ctx context.Context) ([]byte, error)
	// OIDC, when set, is the console's sign-in: an authorization-code flow with PKCE against
	// an OpenID Connect issuer, ending in the same session cookie (see OIDCLogin).
	OIDC *OIDCLogin
	// Secure marks the console cookie Secure (set it behind HTTPS).
	Secure bool
	Now    func() time.Time
	Rand   io.Reader // session nonces; default crypto/rand
	Log    *slog.Logger
	// CallerScope is the scope a lookup by idempotency_key reads a caller's key in when the
	// request names none ("local" locally), and PaymentIDFor derives the payment that key
	// created (payments.PaymentID): with both, the caller's own key finds every attempt.
	CallerScope  string
	PaymentIDFor func(scope, key string) string
	// Payments, when set, serves the payment timeline (GET /ops/payments/{id}/timeline and
	// the console's /ops/payments/{id}).
	Payments PaymentReader
	// Recoveries, when set, serves GET /ops/recoveries and the console's list of running
	// recoveries, and shows a payment's recovery on its page (StorePayments implements it).
	Recoveries Recoveries
	// Steer, when set, serves POST /ops/recoveries/{payment id}/charge-now and /stop, and the
	// console's buttons of the same names on a payment's page.
	Steer RecoverySteerer
	// Reconcile, when set, serves POST /ops/reconcile: an on-demand reconciliation run with the
	// request body as the run's input ({} for the default window, or {"from","to"}).
	Reconcile Reconciler
	// Failures, when set, throttles failed logins and bearer tokens per source IP (the local
	// stack sets it; in AWS API Gateway's authorizer checks the JWT before a request arrives).
	Failures *FailureLimiter

	mux    *http.ServeMux
	routes []Route
	key    []byte
}

// New checks h and returns it ready to serve. It needs Records, and a Token, a Principal or an
// OIDC login.
func New(h Handler) (*Handler, error) {
	if h.Records == nil {
		return nil, errors.New("opsapi: Records is required")
	}
	if h.Token == "" && h.Principal == nil && h.OIDC == nil {
		return nil, errors.New("opsapi: a Token, a Principal or an OIDC login is required")
	}
	return h.register(), nil
}

func (h *Handler) now() time.Time {
	if h.Now == nil {
		return time.Now()
	}
	return h.Now()
}

func (h *Handler) log() *slog.Logger {
	if h.Log == nil {
		return slog.Default()
	}
	return h.Log
}

// Access is what a route asks of its caller before its handler runs.
type Access int

const (
	// Public routes take anyone: the sign-in pages and the /ops redirect.
	Public Access = iota
	// Session routes are console pages and forms: a signed-in operator's session cookie
	// (forms also their CSRF token). Without one they redirect to the sign-in page.
	Session
	// Bearer routes are the JSON API: an operator's bearer token (in AWS, a JWT with the
	// operations scope, checked by API Gateway's authorizer before the function runs).
	Bearer
)

func (a Access) String() string {
	switch a {
	case Session:
		return "session"
	case Bearer:
		return "bearer"
	}
	return "public"
}

// Route is one route the handler serves: a ServeMux pattern ("GET /ops/deadletters/{id}")
// and what it asks of the caller.
type Route struct {
	Pattern string
	Access  Access
}

// Routes lists the routes h serves, in the order they were registered: what API Gateway's
// route table and the API document must each cover.
func (h *Handler) Routes() []Route { return slices.Clone(h.routes) }

// handle registers fn under pattern and records the route.
func (h *Handler) handle(pattern string, access Access, fn http.HandlerFunc) {
	h.mux.HandleFunc(pattern, fn)
	h.routes = append(h.routes, Route{Pattern: pattern, Access: access})
}

// register registers the routes on a fresh mux.
func (h *Handler) register() *Handler {
	h.mux, h.routes, h.key = http.NewServeMux(), nil, h.SessionKey
	if len(h.key) == 0 {
		m := hmac.New(sha256.New, []byte(h.Token))
		m.Write([]byte("twice operator console session key"))
		h.key = m.Sum(nil)
	}
	api := func(pattern string, fn func(http.ResponseWriter, *http.Request, string)) {
		h.handle(pattern, Bearer, h.bearer(fn))
	}
	api("GET /ops/deadletters", h.list)
	api("GET /ops/deadletters/{id}", h.detail)
	api("GET /ops/deadletters/{id}/audit", h.audit)
	api("POST /ops/deadletters/{id}/retry", h.retry)
	api("POST /ops/deadletters/{id}/override", h.override)
	api("POST /ops/deadletters/{id}/resolve", h.closeRecord(ActionResolve))
	api("POST /ops/deadletters/{id}/ignore", h.closeRecord(ActionIgnore))
	api("POST /ops/deadletters/retry", h.bulkRetry)
	api("GET /ops/attempts", h.lookup)
	api("GET /ops/payments/{id}/timeline", h.timelineAPI)
	if h.Recoveries != nil {
		api("GET /ops/recoveries", h.recoveriesAPI)
	}
	if h.Steer != nil {
		api("POST /ops/recoveries/{id}/{action}", h.steerAPI)
	}
	if h.Attempts != nil {
		api("GET /ops/refused", h.refused)
	}
	if h.Reconcile != nil {
		api("POST /ops/reconcile", h.reconcile)
	}
	h.console()
	return h
}

// ServeHTTP serves /ops.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// Action names for closeRecord.
const (
	ActionResolve = "resolve"
	ActionIgnore  = "ignore"
)

// OperatorHeader names the person behind a call made with the shared operator token
// (twicectl --as NAME sends it): the audit trail records "operator:NAME", as the console's
// login form does. It is read only on the shared-token path: an authenticated Principal (the
// JWT's sub in AWS) is who acts, whatever the header says.
const OperatorHeader = "Twice-Operator"

// actor returns who is calling from the Principal function or the bearer token.
func (h *Handler) actor(r *http.Request) (string, bool) {
	if h.Principal != nil {
		if p, ok := h.Principal(r); ok && p != "" {
			return p, true
		}
	}
	if h.Token == "" {
		return "", false
	}
	auth := r.Header.Get("Authorization")
	const prefix = "Bearer "
	if len(auth) <= len(prefix) || !strings.EqualFold(auth[:len(prefix)], prefix) {
		return "", false
	}
	if subtle.ConstantTimeCompare([]byte(auth[len(prefix):]), []byte(h.Token)) != 1 {
		return "", false
	}
	return cleanName(r.Header.Get(OperatorHeader)), true
}

func (h *Handler) bearer(fn func(http.ResponseWriter, *http.Request, string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if h.Failures.Refuse(w, r) {
			return
		}
		who, ok := h.actor(r)
		if !ok {
			if r.Header.Get("Authorization") != "" { // a credential was tried, not merely missing
				h.Failures.Failed(r)
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="twice-ops"`)
			problem.Write(w, problem.New(problem.Unauthorized, "A valid operator token is required."))
			return
		}
		fn(w, r, who)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		problem.Write(w, problem.New(problem.Internal, "The response could not be encoded."))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// fail maps an error to a problem, the operator API's one mapping; internal text never leaves.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	p := problemOf(err)
	if p.Status == http.StatusInternalServerError {
		h.log().ErrorContext(r.Context(), "operator api error", "path", r.URL.Path, "err", err)
	}
	problem.Write(w, p)
}

func problemOf(err error) problem.Problem {
	var fe *FieldError
	switch {
	case errors.As(err, &fe):
		return problem.New(problem.InvalidRequest, fe.Error()).WithFields([]string{fe.Field})
	case errors.Is(err, deadletter.ErrNotFound), errors.Is(err, attempts.ErrNotFound):
		return problem.New(problem.NotFound, "No such record.")
	case errors.Is(err, deadletter.ErrRetryNoteRequired):
		return problem.New(problem.InvalidRequest, "This record's own advice is not to retry; a retry needs a note saying why.").WithFields([]string{"note"})
	case errors.Is(err, deadletter.ErrNoteRequired):
		return problem.New(problem.InvalidRequest, "An override needs an outcome and a note.").WithFields([]string{"outcome", "note"})
	case errors.Is(err, deadletter.ErrInvalid), errors.Is(err, attempts.ErrInvalid):
		return problem.New(problem.InvalidRequest, "The request is not valid.")
	case errors.Is(err, deadletter.ErrNotRetryable):
		return problem.New(problem.NothingToRetry, "This record has nothing to retry; resolve or override it instead.")
	case errors.Is(err, deadletter.ErrClosed):
		return problem.New(problem.RecordClosed, "This record is already closed.")
	case errors.Is(err, deadletter.ErrBusy):
		return problem.New(problem.RecordChanged, "The record changed while you acted; reload and try again.")
	}
	return problem.New(problem.Internal, "Something went wrong; it has been logged.")
}

// httpStatus is the HTTP status and detail of the problem err maps to (the console shows
// them).
func httpStatus(err error) (int, string) {
	p := problemOf(err)
	return p.Status, p.Detail
}

// FieldError is a bad query parameter or body field; its text is safe to show.
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

// Is makes a FieldError match deadletter.ErrInvalid.
func (e *FieldError) Is(target error) bool { return target == deadletter.ErrInvalid }

// ParseFilter reads a list filter from a query string: status, source, class, from, to
// (RFC 3339 or yyyy-mm-dd), q (text), limit, cursor.
func ParseFilter(q url.Values) (deadletter.Filter, error) {
	var f deadletter.Filter
	for k := range q {
		switch k {
		case "status", "source", "class", "from", "to", "q", "limit", "cursor", "csrf":
		default:
			return f, &FieldError{Field: safeField(k), Reason: "unknown parameter"}
		}
	}
	if s := q.Get("status"); s != "" {
		f.Status = deadletter.Status(s)
		if !f.Status.Valid() {
			return f, &FieldError{Field: "status", Reason: "not a status"}
		}
	}
	if s := q.Get("source"); s != "" {
		f.Source = deadletter.Source(s)
		if !oneOf(f.Source, deadletter.Sources) {
			return f, &FieldError{Field: "source", Reason: "not a source"}
		}
	}
	if s := q.Get("class"); s != "" {
		f.Cause = deadletter.Cause(s)
		if !oneOf(f.Cause, deadletter.Causes) {
			return f, &FieldError{Field: "class", Reason: "not a class"}
		}
	}
	var err error
	if f.From, err = parseTime(q.Get("from"), false); err != nil {
		return f, &FieldError{Field: "from", Reason: "want RFC 3339 or yyyy-mm-dd"}
	}
	if f.To, err = parseTime(q.Get("to"), true); err != nil {
		return f, &FieldError{Field: "to", Reason: "want RFC 3339 or yyyy-mm-dd"}
	}
	if !f.From.IsZero() && !f.To.IsZero() && f.To.Before(f.From) {
		return f, &FieldError{Field: "to", Reason: "before from"}
	}
	f.Text = strings.TrimSpace(q.Get("q"))
	if len(f.Text) > 200 || !utf8.ValidString(f.Text) {
		return f, &FieldError{Field: "q", Reason: "at most 200 characters of text"}
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > deadletter.MaxLimit {
			return f, &FieldError{Field: "limit", Reason: fmt.Sprintf("1 to %d", deadletter.MaxLimit)}
		}
		f.Limit = n
	}
	if c := q.Get("cursor"); c != "" {
		if _, err := deadletter.DecodeCursor(c); err != nil {
			return f, &FieldError{Field: "cursor", Reason: "not a cursor from this API"}
		}
		f.Cursor = c
	}
	return f, nil
}

func oneOf[T comparable](v T, set []T) bool {
	for _, s := range set {
		if v == s {
			return true
		}
	}
	return false
}

// safeField keeps an unknown parameter's name printable and short before it is echoed.
func safeField(k string) string {
	var b strings.Builder
	for _, r := range k {
		if b.Len() >= 32 {
			break
		}
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			b.WriteRune(r)
		}
	}
	if b.Len() == 0 {
		return "parameter"
	}
	return b.String()
}

func parseTime(s string, end bool) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		if t.Year() < 2000 || t.Year() > 9999 {
			return time.Time{}, errors.New("year out of range")
		}
		return t.UTC(), nil
	}
	d, err := time.Parse("2006-01-02", s)
	if err != nil {
		return time.Time{}, err
	}
	if d.Year() < 2000 {
		return time.Time{}, errors.New("year out of range")
	}
	if end {
		return d.Add(24*time.Hour - time.Nanosecond), nil
	}
	return d, nil
}

func (h *Handler) list(w http.ResponseWriter, r *http.Request, _ string) {
	f, err := ParseFilter(r.URL.Query())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	page, err := h.Records.List(r.Context(), f)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	// The payments the records name, by id: amount, customer, card, where known.
	writeJSON(w, http.StatusOK, struct {
		deadletter.Page
		Payments map[string]PaymentFacts `json:"payments,omitempty"`
	}{page, h.facts(r.Context(), page.Records)})
}

func (h *Handler) detail(w http.ResponseWriter, r *http.Request, _ string) {
	rec, err := h.Records.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, viewOf(rec))
}

// recordView is a record as the API shows it: with the actions that apply to it now and what
// an override would change.
type recordView struct {
	deadletter.Record
	Actions        []string `json:"actions"`
	OverrideEffect string   `json:"override_effect"`
}

func viewOf(r deadletter.Record) recordView {
	return recordView{Record: r, Actions: r.Actions(), OverrideEffect: r.OverrideEffect()}
}

func (h *Handler) audit(w http.ResponseWriter, r *http.Request, _ string) {
	rec, err := h.Records.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": rec.ID, "audit": rec.Audit})
}

// ActionBody is the JSON body of an action. Override needs Result ("outcome") and Note; the others take
// an optional Note.
type ActionBody struct {
	Result string `json:"outcome"`
	Note   string `json:"note"`
	// Retries, on a retry, is the record's retries as the caller saw them: a record retried
	// since is left alone (retried false), so a repeated request does the work once.
	Retries *int `json:"retries,omitempty"`
}

// maxBody caps an action body.
const maxBody = 16 << 10

// ParseActionBody reads an action body; an empty body is an empty ActionBody.
func ParseActionBody(rd io.Reader) (ActionBody, error) {
	var b ActionBody
	data, err := io.ReadAll(io.LimitReader(rd, maxBody+1))
	if err != nil {
		return b, &FieldError{Field: "body", Reason: "could not be read"}
	}
	if len(data) > maxBody {
		return b, &FieldError{Field: "body", Reason: "too large"}
	}
	if len(strings.TrimSpace(string(data))) == 0 {
		return b, nil
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		return ActionBody{}, &FieldError{Field: "body", Reason: `want {"outcome": string, "note": string}`}
	}
	if dec.More() {
		return ActionBody{}, &FieldError{Field: "body", Reason: "one JSON object only"}
	}
	if !utf8.ValidString(b.Note) || !utf8.ValidString(b.Result) || len(b.Note) > deadletter.MaxNote || len(b.Result) > deadletter.MaxResult {
		return ActionBody{}, &FieldError{Field: "body", Reason: "note or outcome too long"}
	}
	return b, nil
}

func (h *Handler) retry(w http.ResponseWriter, r *http.Request, who string) {
	body, err := ParseActionBody(r.Body)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	seen := -1
	if body.Retries != nil && *body.Retries >= 0 {
		seen = *body.Retries
	}
	rec, retried, err := h.Records.RetrySeen(r.Context(), r.PathValue("id"), who, body.Note, seen)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"retried": retried, "record": rec})
}

func (h *Handler) override(w http.ResponseWriter, r *http.Request, who string) {
	body, err := ParseActionBody(r.Body)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	rec, err := h.Records.Override(r.Context(), r.PathValue("id"), who, body.Result, body.Note)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, viewOf(rec)) // override_effect: what it changed
}

func (h *Handler) closeRecord(action string) func(http.ResponseWriter, *http.Request, string) {
	return func(w http.ResponseWriter, r *http.Request, who string) {
		body, err := ParseActionBody(r.Body)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		do := h.Records.MarkResolved
		if action == ActionIgnore {
			do = h.Records.Ignore
		}
		rec, err := do(r.Context(), r.PathValue("id"), who, body.Note)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, rec)
	}
}

func (h *Handler) bulkRetry(w http.ResponseWriter, r *http.Request, who string) {
	f, err := ParseFilter(r.URL.Query())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	body, err := ParseActionBody(r.Body)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	res, err := h.Records.BulkRetry(r.Context(), f, who, body.Note)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func problemNotConfigured(w http.ResponseWriter) {
	problem.Write(w, problem.New(problem.NotFound, "The attempt log is not configured."))
}

// reconcile runs a reconciliation now and answers its report. A window already reconciled
// answers the stored report (run ids derive from the window).
func (h *Handler) reconcile(w http.ResponseWriter, r *http.Request, who string) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<10))
	if err != nil {
		problem.Write(w, problem.New(problem.MalformedRequest, "The request body could not be read."))
		return
	}
	// No window: everything up to now (not the scheduled window, whose stored report a run
	// within the same minute would get back).
	if t := bytes.TrimSpace(body); len(t) == 0 || bytes.Equal(t, []byte("{}")) {
		body = []byte(`{"up_to_now":true}`)
	}
	rep, err := h.Reconcile.Handle(r.Context(), body)
	switch {
	case errors.Is(err, recon.ErrBadEvent), errors.Is(err, recon.ErrBadWindow):
		problem.Write(w, problem.New(problem.InvalidRequest, "The reconciliation window is not valid: give {} or {\"from\",\"to\"} in RFC 3339.").WithFields([]string{"from", "to"}))
		return
	case err != nil:
		h.log().ErrorContext(r.Context(), "reconciliation failed", "by", who, "err", err)
		problem.Write(w, problem.New(problem.ReconcileFailed, "The reconciliation could not finish; it is safe to run it again."))
		return
	}
	h.log().InfoContext(r.Context(), "reconciliation run", "by", who, "run_id", rep.RunID)
	writeJSON(w, http.StatusOK, rep)
}
