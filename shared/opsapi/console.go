package opsapi

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"

	"github.com/runtwice/twice/shared/attempts"
	"github.com/runtwice/twice/shared/deadletter"
)

//go:generate go run github.com/a-h/templ/cmd/templ@v0.3.1100 generate -f console.templ

// timeFormat is the console's one way of writing a time: "2 Dec 2026 09:06 UTC". The exact
// instant is in the <time> element's datetime attribute (the at component).
const timeFormat = "2 Jan 2006 15:04 UTC"

func when(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(timeFormat)
}

// whenRFC3339 writes a time the API gave as RFC 3339 the console's way ("" when it is not one).
func whenRFC3339(s string) string {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return ""
	}
	return when(t)
}

func pretty(b json.RawMessage) string {
	var out bytes.Buffer
	if json.Indent(&out, b, "", "  ") != nil {
		return string(b)
	}
	return out.String()
}

func query(f deadletter.Filter, cursor string) string {
	return "?" + filterQuery(f, cursor).Encode()
}

func lookupURL(by, value string) templ.SafeURL {
	return templ.SafeURL("/ops/lookup?" + url.Values{"by": {by}, "value": {value}}.Encode())
}

func label(b attempts.By) string { return strings.ReplaceAll(string(b), "_", " ") }

// CookieName is the console session cookie.
const CookieName = "twice_ops"

// sessionTTL is how long a console login lasts.
const sessionTTL = 12 * time.Hour

type session struct {
	Actor string
	CSRF  string
}

func (h *Handler) console() {
	h.handle("GET /ops/{$}", Session, h.page(h.listPage))
	h.handle("GET /ops/records/{id}", Session, h.page(h.detailPage))
	h.handle("GET /ops/lookup", Session, h.page(h.lookupPage))
	h.handle("GET /ops/payments/{id}", Session, h.page(h.timelinePage))
	h.handle("GET /ops/running", Session, h.page(h.recoveriesPageHandler))
	if h.Steer != nil {
		h.handle("POST /ops/payments/{id}/recovery/{action}", Session, h.form(h.steerForm))
	}
	h.handle("POST /ops/records/{id}/{action}", Session, h.form(h.actionForm))
	h.handle("POST /ops/bulk-retry", Session, h.form(h.bulkForm))
	h.handle("GET /ops/login", Public, h.loginPage)
	h.handle("GET /ops/callback", Public, h.callback)
	// HTTP APIs route /ops and /ops/ to the same route; the console lives at /ops/.
	h.handle("GET /ops", Public, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ops/", http.StatusSeeOther)
	})
	h.handle("POST /ops/login", Public, h.login)
	h.handle("POST /ops/logout", Session, h.form(h.logout))
}

// sessionKey is the key that signs sessions and CSRF tokens: SessionKeySource's (a secret read
// on first use in AWS) or the fixed one.
func (h *Handler) sessionKey(ctx context.Context) ([]byte, error) {
	if h.SessionKeySource != nil {
		k, err := h.SessionKeySource(ctx)
		if err == nil && len(k) < 16 {
			err = errors.New("opsapi: the session key is shorter than 16 bytes")
		}
		return k, err
	}
	return h.key, nil
}

func mac(key []byte, parts ...string) string {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return hex.EncodeToString(m.Sum(nil))
}

// session reads the caller's console session: the Principal (AWS) or the signed cookie the
// login form set. The CSRF token is bound to the session, so a form from another session or
// site does not carry it.
func (h *Handler) session(r *http.Request) (session, bool) {
	key, err := h.sessionKey(r.Context())
	if err != nil {
		h.log().ErrorContext(r.Context(), "console session key", "err", err)
		return session{}, false
	}
	if h.Principal != nil {
		if p, ok := h.Principal(r); ok && p != "" {
			return session{Actor: p, CSRF: mac(key, "csrf", "principal", p)}, true
		}
	}
	c, err := r.Cookie(CookieName)
	if err != nil || (h.Token == "" && h.OIDC == nil) {
		return session{}, false
	}
	payload, sig, ok := strings.Cut(c.Value, ".")
	if !ok || subtle.ConstantTimeCompare([]byte(sig), []byte(mac(key, "session", payload))) != 1 {
		return session{}, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return session{}, false
	}
	// payload: nonce "|" expiry unix "|" name
	parts := strings.SplitN(string(raw), "|", 3)
	if len(parts) != 3 {
		return session{}, false
	}
	exp, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || h.now().Unix() > exp {
		return session{}, false
	}
	return session{Actor: parts[2], CSRF: mac(key, "csrf", parts[0])}, true
}

type view struct {
	Title   string
	Session session
	Error   string
	Notice  string
	// LoginURL, on the sign-in page, sends the browser to the identity provider instead of
	// asking for the operator token.
	LoginURL string
}

func (h *Handler) render(w http.ResponseWriter, status int, page templ.Component) {
	var buf bytes.Buffer
	if err := page.Render(context.Background(), &buf); err != nil {
		h.log().Error("console page", "err", err)
		http.Error(w, "Something went wrong; it has been logged.", http.StatusInternalServerError)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

func (h *Handler) page(fn func(http.ResponseWriter, *http.Request, session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, ok := h.session(r)
		if !ok {
			http.Redirect(w, r, "/ops/login", http.StatusSeeOther)
			return
		}
		fn(w, r, s)
	}
}

// form guards a console POST: a session and its CSRF token in the form.
func (h *Handler) form(fn func(http.ResponseWriter, *http.Request, session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, ok := h.session(r)
		if !ok {
			http.Redirect(w, r, "/ops/login", http.StatusSeeOther)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		if err := r.ParseForm(); err != nil {
			h.render(w, http.StatusBadRequest, errorView(view{Title: "Bad request", Session: s, Error: "The form could not be read."}))
			return
		}
		if subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(s.CSRF)) != 1 {
			h.render(w, http.StatusForbidden, errorView(view{Title: "Forbidden", Session: s, Error: "This form has expired. Reload the page and try again."}))
			return
		}
		fn(w, r, s)
	}
}

func (h *Handler) loginPage(w http.ResponseWriter, r *http.Request) {
	if h.OIDC != nil {
		h.OIDC.start(w, r, h)
		return
	}
	h.render(w, http.StatusOK, loginView(view{Title: "Sign in"}))
}

func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	if h.Failures.Refuse(w, r) {
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	if err := r.ParseForm(); err != nil || h.Token == "" ||
		subtle.ConstantTimeCompare([]byte(r.PostForm.Get("token")), []byte(h.Token)) != 1 {
		h.Failures.Failed(r)
		h.render(w, http.StatusUnauthorized, loginView(view{Title: "Sign in", Error: "That token is not valid."}))
		return
	}
	if err := h.startSession(w, r, cleanName(r.PostForm.Get("name"))); err != nil {
		h.render(w, http.StatusInternalServerError, loginView(view{Title: "Sign in", Error: "Could not start a session."}))
		return
	}
	http.Redirect(w, r, "/ops/", http.StatusSeeOther)
}

// startSession sets the console session cookie for actor (HttpOnly, SameSite=Strict, Secure
// behind HTTPS), signed with the session key and valid for sessionTTL.
func (h *Handler) startSession(w http.ResponseWriter, r *http.Request, actor string) error {
	key, err := h.sessionKey(r.Context())
	if err != nil {
		h.log().ErrorContext(r.Context(), "console session key", "err", err)
		return err
	}
	nonce, err := h.random(16)
	if err != nil {
		return err
	}
	exp := h.now().Add(sessionTTL)
	payload := base64.RawURLEncoding.EncodeToString([]byte(nonce + "|" + strconv.FormatInt(exp.Unix(), 10) + "|" + actor))
	// Max-Age rather than Expires: the browser counts it from its own clock, and the signed
	// expiry inside the value is what the server checks against its clock.
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: payload + "." + mac(key, "session", payload), Path: "/ops",
		MaxAge: int(sessionTTL / time.Second), HttpOnly: true, Secure: h.Secure, SameSite: http.SameSiteStrictMode})
	return nil
}

// random returns n random bytes, hex.
func (h *Handler) random(n int) (string, error) {
	rd := h.Rand
	if rd == nil {
		rd = rand.Reader
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(rd, b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// cleanName keeps the operator's name for the audit trail short and printable.
func cleanName(s string) string {
	var b strings.Builder
	for _, r := range strings.TrimSpace(s) {
		if b.Len() >= 40 {
			break
		}
		if r >= ' ' && r != '|' && r != 0x7f {
			b.WriteRune(r)
		}
	}
	if b.Len() == 0 {
		return "operator"
	}
	return "operator:" + b.String()
}

func (h *Handler) logout(w http.ResponseWriter, r *http.Request, _ session) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/ops", MaxAge: -1, HttpOnly: true, Secure: h.Secure, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/ops/login", http.StatusSeeOther)
}

func filterQuery(f deadletter.Filter, cursor string) url.Values {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("status", string(f.Status))
	set("source", string(f.Source))
	set("class", string(f.Cause))
	if !f.From.IsZero() {
		set("from", f.From.Format(time.RFC3339))
	}
	if !f.To.IsZero() {
		set("to", f.To.Format(time.RFC3339))
	}
	set("q", f.Text)
	set("cursor", cursor)
	return q
}

type listData struct {
	Rows     []listRow
	Sort     string
	Desc     bool
	Filter   deadletter.Filter
	Page     deadletter.Page
	Open     int64
	Chart    chart
	Statuses []deadletter.Status
	Sources  []deadletter.Source
	Causes   []deadletter.Cause
	From, To string
}

func (h *Handler) listPage(w http.ResponseWriter, r *http.Request, s session) {
	d := listData{Statuses: deadletter.Statuses, Sources: deadletter.Sources, Causes: deadletter.Causes}
	v := view{Title: "Dead letters", Session: s, Notice: notice(r.URL.Query().Get("done"))}
	q := r.URL.Query()
	d.Sort, d.Desc = readSort(q)
	q.Del("done")
	q.Del("sort")
	q.Del("order")
	f, err := ParseFilter(q)
	status := http.StatusOK
	if err != nil {
		v.Error, status = "Filter: "+err.Error(), http.StatusBadRequest
		f = deadletter.Filter{}
	}
	if f.Status == "" {
		f.Status = deadletter.StatusOpen
	}
	d.Filter = f
	if !f.From.IsZero() {
		d.From = f.From.Format("2006-01-02")
	}
	if !f.To.IsZero() {
		d.To = f.To.Format("2006-01-02")
	}
	ctx := r.Context()
	if d.Page, err = h.Records.List(ctx, f); err != nil {
		h.consoleFail(w, r, s, err)
		return
	}
	if d.Open, err = h.Records.OpenCount(ctx); err != nil {
		h.consoleFail(w, r, s, err)
		return
	}
	hist, err := h.Records.OpenHistory(ctx, 48)
	if err != nil {
		h.consoleFail(w, r, s, err)
		return
	}
	d.Chart = drawChart(hist)
	facts := h.facts(ctx, d.Page.Records)
	now := h.now()
	for _, rec := range d.Page.Records {
		pay := rec.PaymentID
		if pay == "" {
			pay = rec.Facts.PaymentID
		}
		d.Rows = append(d.Rows, listRow{Record: rec, PaymentFacts: facts[pay], Pay: pay, Age: now.Sub(rec.CreatedAt), Next: nextAction(rec)})
	}
	sortRows(d.Rows, d.Sort, d.Desc)
	h.render(w, status, listView(v, d))
}

func notice(done string) string {
	switch done {
	case "retry":
		// The retry is committed with the record (and, where the table relays, sent by the
		// outbox relay within seconds); the record closes when its work is done.
		return "Retry queued. This record closes when the work is done, or comes back open if the retry cannot be sent."
	case "retry-noop":
		return "A retry is already in progress; nothing more was sent."
	case "override":
		return "Override recorded."
	case "resolve":
		return "Marked resolved."
	case "ignore":
		return "Marked ignored."
	case "bulk":
		return "Bulk retry queued. Each record closes when its work is done."
	case "steered":
		return "Queued for the recovery; it acts on it within seconds."
	case "not-running":
		return "This payment has no running recovery any more; nothing was sent."
	}
	return ""
}

func (h *Handler) consoleFail(w http.ResponseWriter, r *http.Request, s session, err error) {
	status, detail := httpStatus(err)
	if status == http.StatusInternalServerError {
		h.log().ErrorContext(r.Context(), "console error", "path", r.URL.Path, "err", err)
	}
	h.render(w, status, errorView(view{Title: http.StatusText(status), Session: s, Error: detail}))
}

func (h *Handler) detailPage(w http.ResponseWriter, r *http.Request, s session) {
	rec, err := h.Records.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		h.consoleFail(w, r, s, err)
		return
	}
	h.render(w, http.StatusOK, detailView(view{Title: rec.ID, Session: s, Notice: notice(r.URL.Query().Get("done"))}, rec))
}

func (h *Handler) actionForm(w http.ResponseWriter, r *http.Request, s session) {
	id, note := r.PathValue("id"), r.PostForm.Get("note")
	ctx := r.Context()
	var err error
	done := r.PathValue("action")
	switch done {
	case "retry":
		var retried bool
		// The form carries the retries the page showed: a second click is a no-op.
		seen, serr := strconv.Atoi(r.PostForm.Get("retries"))
		if serr != nil || seen < 0 {
			seen = -1
		}
		if _, retried, err = h.Records.RetrySeen(ctx, id, s.Actor, note, seen); err == nil && !retried {
			done = "retry-noop"
		}
	case "override":
		_, err = h.Records.Override(ctx, id, s.Actor, r.PostForm.Get("outcome"), note)
	case "resolve":
		_, err = h.Records.MarkResolved(ctx, id, s.Actor, note)
	case "ignore":
		_, err = h.Records.Ignore(ctx, id, s.Actor, note)
	default:
		h.render(w, http.StatusNotFound, errorView(view{Title: "Not found", Session: s, Error: "No such action."}))
		return
	}
	if err != nil {
		status, detail := httpStatus(err)
		switch {
		case errors.Is(err, deadletter.ErrRetryNoteRequired):
			detail = "This record's own suggestion says not to retry. To retry it anyway, say why in the note."
		case status == http.StatusInternalServerError:
			h.log().ErrorContext(ctx, "console action", "action", done, "record", id, "err", err)
		}
		rec, gerr := h.Records.Get(ctx, id)
		if gerr != nil {
			h.consoleFail(w, r, s, gerr)
			return
		}
		h.render(w, status, detailView(view{Title: rec.ID, Session: s, Error: detail}, rec))
		return
	}
	http.Redirect(w, r, "/ops/records/"+url.PathEscape(id)+"?done="+done, http.StatusSeeOther)
}

// confirmData is a confirmation page: what the operator is about to do, and the form that
// does it (the same POST again, with confirm=yes). It works without JavaScript, and the page
// says what will happen in numbers before anything is sent.
type confirmData struct {
	Heading string
	Lines   []string
	Action  string      // the form's action
	Fields  [][2]string // carried as hidden inputs
	Button  string
	Cancel  string // where Cancel goes
}

// records writes a count of records: "1 open record", "3 records".
func records(n int, status string) string {
	noun := "records"
	if n == 1 {
		noun = "record"
	}
	return strings.Join(strings.Fields(fmt.Sprintf("%d %s %s", n, status, noun)), " ")
}

// confirmed reports whether a console POST is the second, confirming one.
func confirmed(r *http.Request) bool { return r.PostForm.Get("confirm") == "yes" }

func (h *Handler) bulkForm(w http.ResponseWriter, r *http.Request, s session) {
	q := url.Values{}
	for _, k := range []string{"status", "source", "class", "from", "to", "q"} {
		if v := r.PostForm.Get(k); v != "" {
			q.Set(k, v)
		}
	}
	f, err := ParseFilter(q)
	if err == nil && !confirmed(r) {
		err = h.confirmBulk(w, r, s, f, q)
		if err == nil {
			return
		}
	}
	if err == nil {
		_, err = h.Records.BulkRetry(r.Context(), f, s.Actor, r.PostForm.Get("note"))
	}
	if err != nil {
		h.consoleFail(w, r, s, err)
		return
	}
	q.Set("done", "bulk")
	http.Redirect(w, r, "/ops/?"+q.Encode(), http.StatusSeeOther)
}

// confirmBulk shows what a bulk retry of f would do: how many records it retries, and how
// many it skips because their own suggestion says not to retry.
func (h *Handler) confirmBulk(w http.ResponseWriter, r *http.Request, s session, f deadletter.Filter, q url.Values) error {
	if f.Status == "" {
		f.Status = deadletter.StatusOpen
	}
	var retry, skip int
	f.Cursor, f.Limit = "", deadletter.MaxLimit
	for retry+skip < deadletter.MaxBulk {
		page, err := h.Records.List(r.Context(), f)
		if err != nil {
			return err
		}
		for _, rec := range page.Records {
			if retry+skip >= deadletter.MaxBulk {
				break
			}
			if rec.RetryAdvised() {
				retry++
			} else {
				skip++
			}
		}
		if page.Cursor == "" {
			break
		}
		f.Cursor = page.Cursor
	}
	d := confirmData{Heading: fmt.Sprintf("Retry %s?", records(retry, string(f.Status))), Action: "/ops/bulk-retry",
		Button: "Retry " + records(retry, ""), Cancel: "/ops/?" + q.Encode()}
	d.Lines = append(d.Lines, fmt.Sprintf("Each of the %s that match these filters and may be retried is sent to its original target once, and audited under your name.", records(retry, "")))
	if skip > 0 {
		d.Lines = append(d.Lines, fmt.Sprintf("Skipped: %s whose own suggestion says not to retry (a hard decline, for example). Open a record to retry it anyway, with a note.", records(skip, "")))
	}
	for _, k := range []string{"status", "source", "class", "from", "to", "q"} {
		if v := q.Get(k); v != "" {
			d.Fields = append(d.Fields, [2]string{k, v})
		}
	}
	d.Fields = append(d.Fields, [2]string{"note", r.PostForm.Get("note")})
	h.render(w, http.StatusOK, confirmView(view{Title: "Confirm bulk retry", Session: s}, d))
	return nil
}

type lookupData struct {
	By        string
	Value     string
	Page      attempts.Page
	Asked     bool
	PaymentID string
	Scope     string
}

func (h *Handler) lookupPage(w http.ResponseWriter, r *http.Request, s session) {
	d := lookupData{By: r.URL.Query().Get("by"), Value: strings.TrimSpace(r.URL.Query().Get("value"))}
	v := view{Title: "Attempt lookup", Session: s}
	status := http.StatusOK
	if d.Value != "" {
		q := url.Values{}
		q.Set(d.By, d.Value)
		by, value, err := ParseLookup(q)
		switch {
		case err != nil:
			v.Error, status = "Choose what to look up by and give a value.", http.StatusBadRequest
		case h.Attempts == nil:
			v.Error = "The attempt log is not configured."
		default:
			var res Lookup
			res, err = h.find(r.Context(), by, value, "", "")
			d.Page, d.PaymentID, d.Scope = res.Page, res.PaymentID, res.Scope
			if err != nil {
				st, detail := httpStatus(err)
				if st == http.StatusInternalServerError {
					h.log().ErrorContext(r.Context(), "console lookup", "err", err)
				}
				v.Error, status = detail, st
			}
			d.Asked = err == nil
		}
	}
	h.render(w, status, lookupView(v, d))
}

// chart is an inline SVG line chart of the open count per hour.
type chart struct {
	Width, Height int
	Line, Area    string
	Max           int64
	First, Last   string
	Now           int64
	Empty         bool
}

func drawChart(hs []deadletter.HourCount) chart {
	c := chart{Width: 720, Height: 140, Empty: len(hs) == 0}
	if c.Empty {
		return c
	}
	for _, h := range hs {
		if h.Open > c.Max {
			c.Max = h.Open
		}
	}
	top := c.Max
	if top < 1 {
		top = 1
	}
	const pad = 4
	dx := float64(c.Width-2*pad) / float64(max(len(hs)-1, 1))
	var line strings.Builder
	for i, h := range hs {
		x := pad + float64(i)*dx
		y := float64(pad) + float64(c.Height-2*pad)*(1-float64(h.Open)/float64(top))
		fmt.Fprintf(&line, "%.1f,%.1f ", x, y)
	}
	c.Line = strings.TrimSpace(line.String())
	c.Area = fmt.Sprintf("%d,%d %s %.1f,%d", pad, c.Height-pad, c.Line, pad+float64(len(hs)-1)*dx, c.Height-pad)
	c.First = when(hs[0].Hour)
	c.Last = when(hs[len(hs)-1].Hour)
	c.Now = hs[len(hs)-1].Open
	return c
}
