package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/runtwice/twice/shared/opsapi"
)

const (
	defaultURL   = "http://127.0.0.1:3000"
	defaultToken = "twice-local-operator-token" // the local stack's default (inprocess.DefaultOperatorToken)
)

const usage = `twicectl: the operator API from a terminal

usage: twicectl [--url URL] [--token TOKEN] [--as NAME] [--json] COMMAND

  attempts KEY|ID [--by KIND] [--scope SCOPE]
        every attempt filed under a caller's Idempotency-Key (in SCOPE, default the API's),
        a payment id (pay_), event id (evt_), provider payment id (pi_) or invoice (in_);
        --by idempotency_key|payment_id|event_id|provider_payment_id|invoice overrides the guess
  timeline PAYMENT
        the payment's history in time order: API calls, provider calls, webhooks, recovery
        charges, dead letters and what operators did to them
  deadletters ls [--status S] [--source S] [--class C] [--q TEXT] [--limit N]
  deadletters retry|resolve|ignore ID [--note TEXT]
        a retry is queued (the outbox relay sends it; the record closes when the work
        is done); resolve and ignore take effect at once
  recoveries ls [--limit N] [--cursor C]
        the running recoveries, soonest next attempt first (GET /ops/recoveries)
  smoke [--payments-token T] [--wait 60s] [--key K] [--allow-live]
        the post-deploy check: a test-mode payment (pm_card_visa, 100 usd) and its replay,
        the provider's webhook for it in the attempt log (waits up to --wait), /ops with the
        operator token; one line per check, exit 1 on any failure (docs/deploy.md).
        --payments-token (or $TWICE_PAYMENTS_TOKEN) is the bearer token for /payments (none
        locally); --token is the operator's. Refuses live mode unless --allow-live.

--url defaults to $TWICE_URL or ` + defaultURL + `; --token to $TWICE_OPERATOR_TOKEN or the
local stack's default. --as NAME names the person acting with the shared token: the audit
trail records operator:NAME (with a JWT in AWS, the token's subject is recorded and --as is
ignored). --json prints the API's JSON answer unchanged.
`

// errUsage is a command line that does not parse; it exits 2.
var errUsage = errors.New("usage")

type cli struct {
	base, token, as string
	json            bool
	out, errOut     io.Writer
	http            *http.Client
}

// parse splits args into positionals and --flags (before or after the positionals);
// booleans are listed in bools.
func parse(args []string, bools map[string]bool) (pos []string, flags map[string]string, err error) {
	flags = map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			pos = append(pos, a)
			continue
		}
		name := strings.TrimLeft(a, "-")
		if k, v, ok := strings.Cut(name, "="); ok {
			flags[k] = v
			continue
		}
		if bools[name] {
			flags[name] = "true"
			continue
		}
		if i+1 >= len(args) {
			return nil, nil, fmt.Errorf("%w: --%s needs a value", errUsage, name)
		}
		flags[name] = args[i+1]
		i++
	}
	return pos, flags, nil
}

func run(args []string, stdout, stderr io.Writer, env func(string) string) int {
	pos, flags, err := parse(args, map[string]bool{"json": true, "help": true, "h": true, "allow-live": true})
	if err != nil {
		fmt.Fprintln(stderr, err)
		fmt.Fprint(stderr, usage)
		return 2
	}
	c := &cli{base: first(flags["url"], env("TWICE_URL"), defaultURL), token: first(flags["token"], env("TWICE_OPERATOR_TOKEN"), defaultToken), as: flags["as"],
		json: flags["json"] == "true", out: stdout, errOut: stderr, http: &http.Client{Timeout: 30 * time.Second}}
	if flags["help"] == "true" || flags["h"] == "true" || len(pos) == 0 {
		fmt.Fprint(stdout, usage)
		if len(pos) == 0 && flags["help"] != "true" && flags["h"] != "true" {
			return 2
		}
		return 0
	}
	known := map[string]bool{"url": true, "token": true, "json": true, "by": true, "scope": true, "status": true,
		"source": true, "class": true, "q": true, "limit": true, "note": true, "as": true, "cursor": true,
		"payments-token": true, "key": true, "payment-method": true, "amount": true, "currency": true, "wait": true, "allow-live": true}
	for k := range flags {
		if !known[k] {
			fmt.Fprintf(stderr, "unknown flag --%s\n", k)
			return 2
		}
	}
	ctx := context.Background()
	switch {
	case pos[0] == "attempts" && len(pos) == 2:
		err = c.attempts(ctx, pos[1], flags["by"], flags["scope"])
	case pos[0] == "timeline" && len(pos) == 2:
		err = c.timeline(ctx, pos[1])
	case pos[0] == "deadletters" && len(pos) == 2 && pos[1] == "ls":
		err = c.deadletters(ctx, flags)
	case pos[0] == "deadletters" && len(pos) == 3 && (pos[1] == "retry" || pos[1] == "resolve" || pos[1] == "ignore"):
		err = c.act(ctx, pos[1], pos[2], flags["note"])
	case pos[0] == "smoke" && len(pos) == 1:
		s, err := newSmoke(c, flags, env, time.Now())
		if err != nil {
			fmt.Fprintln(stderr, "twicectl:", err)
			return 2
		}
		return s.run(ctx)
	case pos[0] == "recoveries" && len(pos) == 2 && pos[1] == "ls":
		err = c.recoveries(ctx, flags)
	default:
		fmt.Fprint(stderr, usage)
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "twicectl:", err)
		if errors.Is(err, errUsage) {
			return 2
		}
		return 1
	}
	return 0
}

func first(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// apiError is a problem+json answer.
type apiError struct {
	Status int    `json:"status"`
	Title  string `json:"title"`
	Detail string `json:"detail"`
}

func (e *apiError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, e.Title, e.Detail)
}

// call sends one request and returns the JSON body of a 2xx answer.
func (c *cli) call(ctx context.Context, method, path string, body any) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.base, "/")+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if c.as != "" {
		req.Header.Set(opsapi.OperatorHeader, c.as)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		e := &apiError{Status: resp.StatusCode, Title: http.StatusText(resp.StatusCode)}
		_ = json.Unmarshal(b, e)
		return nil, e
	}
	return b, nil
}

// emit prints the raw JSON with --json, or calls table.
func (c *cli) emit(raw []byte, v any, table func(w *tabwriter.Writer)) error {
	if c.json {
		_, err := c.out.Write(raw)
		return err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("the answer is not what this twicectl expects: %w", err)
	}
	w := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	table(w)
	return w.Flush()
}

// guess names what an id is by its prefix; anything else is a caller's Idempotency-Key.
func guess(v string) string {
	for p, by := range map[string]string{"pay_": "payment_id", "evt_": "event_id", "pi_": "provider_payment_id", "in_": "invoice"} {
		if strings.HasPrefix(v, p) {
			return by
		}
	}
	return "idempotency_key"
}

type attempt struct {
	ID, Direction, Provider, Operation, Method, Path, Outcome, Err string
	Status                                                         int
	StartedAt                                                      time.Time `json:"started_at"`
	Duration                                                       int64     `json:"duration_ns"`
	PaymentID                                                      string    `json:"payment_id"`
}

func (c *cli) attempts(ctx context.Context, value, by, scope string) error {
	if by == "" {
		by = guess(value)
	}
	q := url.Values{by: {value}}
	if scope != "" {
		q.Set("scope", scope)
	}
	raw, err := c.call(ctx, "GET", "/ops/attempts?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	var page struct {
		Attempts         []attempt
		PaymentID        string `json:"payment_id"`
		Scope            string
		UnverifiedClaims int    `json:"unverified_claims"`
		Notice           string `json:"notice"`
		Cursor           string
	}
	return c.emit(raw, &page, func(w *tabwriter.Writer) {
		if page.PaymentID != "" {
			fmt.Fprintf(w, "key %q in scope %s is payment %s\n\n", value, page.Scope, page.PaymentID)
		}
		fmt.Fprintln(w, "WHEN\tDIRECTION\tOPERATION\tSTATUS\tOUTCOME\tTOOK\tPAYMENT")
		for _, a := range page.Attempts {
			fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", a.StartedAt.UTC().Format(time.DateTime), a.Direction, a.Operation,
				a.Status, a.Outcome, human(time.Duration(a.Duration)), a.PaymentID)
		}
		if len(page.Attempts) == 0 {
			fmt.Fprintln(w, "(no attempts under that value)")
		}
		if page.UnverifiedClaims > 0 {
			fmt.Fprintf(w, "\n%s (%d refused)\n", page.Notice, page.UnverifiedClaims)
		}
		if page.Cursor != "" {
			fmt.Fprintln(w, "\n(more: use --json and the cursor)")
		}
	})
}

func (c *cli) timeline(ctx context.Context, id string) error {
	raw, err := c.call(ctx, "GET", "/ops/payments/"+url.PathEscape(id)+"/timeline", nil)
	if err != nil {
		return err
	}
	var tl struct {
		Payment struct {
			ID, Status, Currency, Customer string
			Amount                         int64
			ProviderPaymentID              string `json:"provider_payment_id"`
		}
		Rows []struct {
			At                                     time.Time
			Kind, Title, Outcome, Duration, Detail string
			Status                                 int
		}
		UnverifiedClaims int    `json:"unverified_claims"`
		Notice           string `json:"notice"`
	}
	return c.emit(raw, &tl, func(w *tabwriter.Writer) {
		p := tl.Payment
		fmt.Fprintf(w, "%s  %s  %s  %s  %s\n\n", p.ID, p.Status, opsapi.Money(p.Amount, p.Currency), p.Customer, p.ProviderPaymentID)
		fmt.Fprintln(w, "WHEN\tKIND\tWHAT\tSTATUS\tOUTCOME\tTOOK")
		for _, r := range tl.Rows {
			st := ""
			if r.Status != 0 {
				st = fmt.Sprint(r.Status)
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", r.At.UTC().Format("2006-01-02 15:04:05.000"), r.Kind, r.Title, st, r.Outcome, r.Duration)
		}
		if tl.UnverifiedClaims > 0 {
			fmt.Fprintf(w, "\n%s (%d refused)\n", tl.Notice, tl.UnverifiedClaims)
		}
	})
}

func (c *cli) deadletters(ctx context.Context, flags map[string]string) error {
	q := url.Values{}
	for _, k := range []string{"status", "source", "class", "q", "limit"} {
		if v := flags[k]; v != "" {
			q.Set(k, v)
		}
	}
	raw, err := c.call(ctx, "GET", "/ops/deadletters?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	var page struct {
		Records []struct {
			ID, Status, Source, Class, Explanation string
			PaymentID                              string    `json:"payment_id"`
			CreatedAt                              time.Time `json:"created_at"`
		}
		Payments map[string]struct {
			Amount   int64
			Currency string
			Customer string
			Brand    string `json:"card_brand"`
			Last4    string `json:"card_last4"`
		}
		Cursor string
	}
	return c.emit(raw, &page, func(w *tabwriter.Writer) {
		fmt.Fprintln(w, "ID\tSTATUS\tSOURCE\tCLASS\tAMOUNT\tCUSTOMER\tCARD\tCREATED\tPAYMENT")
		for _, r := range page.Records {
			p := page.Payments[r.PaymentID]
			amount, card := "", ""
			if p.Currency != "" {
				amount = opsapi.Money(p.Amount, p.Currency)
			}
			if p.Brand != "" || p.Last4 != "" {
				card = strings.TrimSpace(p.Brand + " " + p.Last4)
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Status, r.Source, r.Class, amount, p.Customer, card,
				r.CreatedAt.UTC().Format(time.DateTime), r.PaymentID)
		}
		if len(page.Records) == 0 {
			fmt.Fprintln(w, "(none)")
		}
	})
}

func (c *cli) act(ctx context.Context, action, id, note string) error {
	raw, err := c.call(ctx, "POST", "/ops/deadletters/"+url.PathEscape(id)+"/"+action, map[string]string{"note": note})
	if err != nil {
		return err
	}
	if c.json {
		_, err := c.out.Write(raw)
		return err
	}
	var res struct {
		ID      string
		Status  string
		Retried *bool
		Record  *struct{ ID, Status string }
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return err
	}
	if res.Record != nil {
		res.ID, res.Status = res.Record.ID, res.Record.Status
	}
	// A retry is only queued: the outbox relay sends it and the work's consumer closes the
	// record; resolve and ignore are done when the API answers.
	msg := map[string]string{"retry": "retry queued; the record closes when the work is done",
		"resolve": "marked resolved", "ignore": "marked ignored"}[action]
	if res.Retried != nil && !*res.Retried {
		msg = "a retry is already in progress; nothing more was sent"
	}
	fmt.Fprintf(c.out, "%s: %s (status %s)\n", res.ID, msg, res.Status)
	return nil
}

func (c *cli) recoveries(ctx context.Context, flags map[string]string) error {
	q := url.Values{}
	for _, k := range []string{"limit", "cursor"} {
		if v := flags[k]; v != "" {
			q.Set(k, v)
		}
	}
	path := "/ops/recoveries"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	raw, err := c.call(ctx, "GET", path, nil)
	if err != nil {
		return err
	}
	var page struct {
		Recoveries []struct {
			PaymentID     string    `json:"payment_id"`
			State         string    `json:"state"`
			Round         int       `json:"round"`
			Attempts      int       `json:"attempts"`
			NextAttemptAt time.Time `json:"next_attempt_at"`
			Reason        string    `json:"reason"`
			Customer      string    `json:"customer"`
			Amount        int64     `json:"amount"`
			Currency      string    `json:"currency"`
			CardBrand     string    `json:"card_brand"`
		}
		Cursor string
	}
	return c.emit(raw, &page, func(w *tabwriter.Writer) {
		fmt.Fprintln(w, "PAYMENT\tSTATE\tROUND\tATTEMPTS\tNEXT ATTEMPT\tREASON\tAMOUNT\tCUSTOMER\tCARD")
		for _, r := range page.Recoveries {
			next, amount := "", ""
			if !r.NextAttemptAt.IsZero() {
				next = r.NextAttemptAt.UTC().Format(time.DateTime)
			}
			if r.Currency != "" {
				amount = opsapi.Money(r.Amount, r.Currency)
			}
			fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", r.PaymentID, r.State, r.Round, r.Attempts, next, r.Reason,
				amount, r.Customer, r.CardBrand)
		}
		if len(page.Recoveries) == 0 {
			fmt.Fprintln(w, "(no running recoveries)")
		}
		if page.Cursor != "" {
			fmt.Fprintf(w, "\n(more: --cursor %s)\n", page.Cursor)
		}
	})
}

// human writes a duration as the console does.
func human(d time.Duration) string { return opsapi.HumanDuration(d) }
