package stripesim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runtwice/twice/infra/providersim/stripesim"
	"github.com/runtwice/twice/shared/boltstore"
	"github.com/runtwice/twice/shared/clock"
	"github.com/runtwice/twice/shared/metrics"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/recon"
	"github.com/runtwice/twice/shared/store"
	"github.com/runtwice/twice/shared/stripeprovider"
)

// recordingSink is the dead-letter table's stand-in: it records every Open.
type recordingSink struct {
	mu     sync.Mutex
	opened []recon.Difference
}

func (s *recordingSink) Open(_ context.Context, d recon.Difference) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opened = append(s.opened, d)
	return nil
}

func (s *recordingSink) all() []recon.Difference {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]recon.Difference(nil), s.opened...)
}

// listCalls counts the provider's list pages: of PaymentIntents and of refunds.
type listCalls struct {
	mu      sync.Mutex
	n       int
	refunds int
}

func (l *listCalls) Observe(_ context.Context, c stripeprovider.Call) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case c.Method == http.MethodGet && c.Path == "/v1/payment_intents":
		l.n++
	case c.Method == http.MethodGet && c.Path == "/v1/refunds":
		l.refunds++
	}
}

func (l *listCalls) count() int { l.mu.Lock(); defer l.mu.Unlock(); return l.n }

func (l *listCalls) refundPages() int { l.mu.Lock(); defer l.mu.Unlock(); return l.refunds }

// countingStore counts index queries of the payments table (pages read on our side).
type countingStore struct {
	store.Store
	mu    sync.Mutex
	pages int
}

func (c *countingStore) Query(ctx context.Context, q store.Query) (store.Page, error) {
	if q.Table == payments.Table && q.Index {
		c.mu.Lock()
		c.pages++
		c.mu.Unlock()
	}
	return c.Store.Query(ctx, q)
}

func (c *countingStore) count() int { c.mu.Lock(); defer c.mu.Unlock(); return c.pages }

type env struct {
	counted *countingStore
	t       *testing.T
	lists   *listCalls
	clock   *clock.Fake // shared by the simulator and the reconciler, so created times and windows agree
	simURL  string
	prov    *stripeprovider.Client
	store   store.Store
	sink    *recordingSink
	metrics *bytes.Buffer
	rec     *recon.Reconciler
	seq     int
}

func newEnv(t *testing.T) *env {
	t.Helper()
	clk := clock.NewFake(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	sim, err := stripesim.New(stripesim.Config{DataDir: t.TempDir(), Now: clk.Now, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim) // 127.0.0.1
	t.Cleanup(func() { srv.Close(); sim.Close() })
	lists := &listCalls{}
	prov, err := stripeprovider.New(stripeprovider.Client{APIKey: stripesim.DefaultAPIKey, BaseURL: srv.URL, Now: clk.Now, Observer: lists})
	if err != nil {
		t.Fatal(err)
	}
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "twice.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	counted := &countingStore{Store: st}
	e := &env{t: t, counted: counted, lists: lists, clock: clk, simURL: srv.URL, prov: prov, store: counted, sink: &recordingSink{}, metrics: &bytes.Buffer{}}
	e.rec = &recon.Reconciler{Store: counted, Provider: prov, Sink: e.sink, Now: clk.Now,
		Metrics: &recon.Metrics{Out: &metrics.EMF{W: e.metrics}}, Log: slog.New(slog.DiscardHandler)}
	return e
}

// pay makes a payment the way the payments API does: the provider call with our id in the
// metadata, then our record and the provider-id alias. It returns our record.
func (e *env) pay(amount int64, status string, meta map[string]string) payments.Payment {
	e.t.Helper()
	e.seq++
	id := fmt.Sprintf("pay_%04d", e.seq)
	m := map[string]string{"twice_payment_id": id, "twice_scope": "test"}
	for k, v := range meta {
		m[k] = v
	}
	pp, err := e.prov.Create(context.Background(), provider.CreateRequest{Amount: amount, Currency: "usd",
		Customer: "cus_" + id, PaymentMethod: "pm_card_visa", Metadata: m, IdempotencyKey: "key-" + id})
	if err != nil {
		e.t.Fatal(err)
	}
	if status == "" {
		status = string(pp.Status)
	}
	p := payments.Payment{ID: id, Scope: "test", Status: status, Amount: amount, Currency: "usd", Customer: "cus_" + id,
		Invoice: m["twice_invoice"], ProviderPaymentID: pp.ID, CreatedAt: pp.Created, UpdatedAt: pp.Created, Version: 1}
	e.write(p)
	return p
}

func (e *env) write(p payments.Payment) {
	e.t.Helper()
	w, err := p.Put()
	if err != nil {
		e.t.Fatal(err)
	}
	ws := []store.Write{w}
	if p.ProviderPaymentID != "" {
		ws = append(ws, payments.AliasWrite(p.ProviderPaymentID, p.ID))
	}
	if err := e.store.Transact(context.Background(), ws...); err != nil {
		e.t.Fatal(err)
	}
}

// sim calls a simulator control and decodes the answer into out (when not nil).
func (e *env) sim(method, path string, body any, out any) {
	e.t.Helper()
	var r *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	} else {
		r = bytes.NewReader(nil)
	}
	req, _ := http.NewRequest(method, e.simURL+path, r)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode/100 != 2 {
		e.t.Fatalf("%s %s: %s", method, path, res.Status)
	}
	if out != nil {
		if err := json.NewDecoder(res.Body).Decode(out); err != nil {
			e.t.Fatal(err)
		}
	}
}

func (e *env) run() recon.Report {
	e.t.Helper()
	rep, err := e.rec.Run(context.Background(), e.rec.DefaultWindow())
	if err != nil {
		e.t.Fatal(err)
	}
	return rep
}

func total(m map[recon.Kind]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// Every class of difference is created through the simulator's controls or by writing our
// records directly, and found by one run; a re-run and an overlapping run add nothing.
func TestEveryClassAgainstSimulator(t *testing.T) {
	e := newEnv(t)
	for range 3 {
		e.pay(1000, "", nil) // clean
	}
	var lost struct{ ID string }
	e.sim("POST", "/_sim/payment_intents", map[string]any{"amount": 4200, "currency": "usd", "customer": "cus_lost",
		"webhook": false, "metadata": map[string]string{"twice_payment_id": "pay_never_written"}}, &lost)
	forgotten := e.pay(1100, "", nil)
	e.sim("DELETE", "/_sim/payment_intents/"+forgotten.ProviderPaymentID, nil, nil)
	stuck := e.pay(1200, provider.StatusProcessing, nil) // the succeeded webhook was dropped
	canceled := e.pay(1300, "", nil)
	e.sim("POST", "/_sim/payment_intents/"+canceled.ProviderPaymentID+"/mutate", map[string]any{"status": "canceled"}, nil)
	changed := e.pay(1400, "", nil)
	e.sim("POST", "/_sim/payment_intents/"+changed.ProviderPaymentID+"/mutate", map[string]any{"amount": 1450}, nil)
	dup := e.pay(1500, "", nil)
	if _, err := e.prov.Create(context.Background(), provider.CreateRequest{Amount: 1500, Currency: "usd", Customer: dup.Customer,
		PaymentMethod: "pm_card_visa", Metadata: map[string]string{"twice_payment_id": dup.ID}, IdempotencyKey: "a-second-key"}); err != nil {
		t.Fatal(err)
	}

	e.clock.Advance(time.Hour)
	rep := e.run()
	want := map[recon.Kind]int{recon.MissingLocally: 1, recon.MissingAtProvider: 1, recon.StatusMismatch: 2,
		recon.AmountMismatch: 1, recon.DuplicateCharge: 1}
	if fmt.Sprint(rep.Found) != fmt.Sprint(want) || fmt.Sprint(rep.Opened) != fmt.Sprint(want) {
		t.Fatalf("found %v opened %v, want %v", rep.Found, rep.Opened, want)
	}
	if rep.ComparedLocal != 8 || rep.ComparedProvider != 9 {
		t.Errorf("compared %d local, %d provider; want 8 and 9", rep.ComparedLocal, rep.ComparedProvider)
	}
	byPayment := map[string]recon.Kind{}
	for _, d := range e.sink.all() {
		id := d.PaymentID
		if d.Kind == recon.MissingLocally {
			id = d.ProviderPaymentID
		}
		byPayment[id] = d.Kind
		if d.RunID != rep.RunID || d.Explanation == "" || d.SuggestedAction == "" {
			t.Errorf("difference %s lacks run id, explanation or action", d.Key)
		}
	}
	wantBy := map[string]recon.Kind{lost.ID: recon.MissingLocally, forgotten.ID: recon.MissingAtProvider,
		stuck.ID: recon.StatusMismatch, canceled.ID: recon.StatusMismatch, changed.ID: recon.AmountMismatch, dup.ID: recon.DuplicateCharge}
	if fmt.Sprint(byPayment) != fmt.Sprint(wantBy) {
		t.Fatalf("opened %v, want %v", byPayment, wantBy)
	}

	again := e.run()
	if !again.Replayed || again.RunID != rep.RunID || len(e.sink.all()) != 6 {
		t.Fatalf("re-run of the same window: replayed=%v, %d opened in all", again.Replayed, len(e.sink.all()))
	}

	e.clock.Advance(time.Hour)
	next := e.run()
	if next.RunID == rep.RunID || fmt.Sprint(next.Found) != fmt.Sprint(want) || total(next.Opened) != 0 || len(e.sink.all()) != 6 {
		t.Fatalf("overlapping run %s: found %v opened %v, %d opened in all", next.RunID, next.Found, next.Opened, len(e.sink.all()))
	}
	stored, err := recon.GetReport(context.Background(), e.store, next.RunID)
	if err != nil || len(stored.Differences) != 6 {
		t.Fatalf("stored report: %v, %v", stored, err)
	}
}

// More than 100 provider objects and local payments: both sides page. A clean state reports
// nothing; one divergence on the last provider page is found.
func TestPaginationAndCleanState(t *testing.T) {
	if testing.Short() {
		t.Skip("creates 230 PaymentIntents")
	}
	e := newEnv(t)
	const n = 230
	for i := range n {
		e.pay(int64(100+i), "", nil)
		if i%10 == 0 {
			e.clock.Advance(time.Minute)
		}
	}
	e.clock.Advance(time.Hour)
	before, localBefore := e.lists.count(), e.counted.count()
	rep := e.run()
	if pages := e.lists.count() - before; pages != 3 {
		t.Errorf("%d provider list pages for %d payments, want 3", pages, n)
	}
	// Two day partitions, each spread over payments.DayShards shards: yesterday's are empty,
	// today's hold 230 items, under a page in every shard. The stuck scan reads the two day
	// partitions' shards each distinct bound earlier too (all empty): a day (pending,
	// processing), 23 hours (requires_action) and 6 days (requires_capture).
	if pages, want := e.counted.count()-localBefore, 4*2*payments.DayShards; pages != want {
		t.Errorf("%d local index pages, want %d", pages, want)
	}
	if rep.ComparedLocal != n || rep.ComparedProvider != n || total(rep.Found) != 0 || len(e.sink.all()) != 0 {
		t.Fatalf("clean state: compared %d/%d, found %v", rep.ComparedLocal, rep.ComparedProvider, rep.Found)
	}
	// The oldest object sorts last in the provider's newest-first list: the third page.
	created := e.clock.Now().Add(-3 * time.Hour).Unix()
	var lost struct{ ID string }
	e.sim("POST", "/_sim/payment_intents", map[string]any{"amount": 999, "currency": "usd", "created": created}, &lost)
	e.clock.Advance(time.Minute)
	rep = e.run()
	got := e.sink.all()
	if total(rep.Found) != 1 || len(got) != 1 || got[0].ProviderPaymentID != lost.ID || got[0].Kind != recon.MissingLocally {
		t.Fatalf("found %v, opened %+v; want %s missing locally", rep.Found, got, lost.ID)
	}
	if rep.ComparedProvider != n+1 {
		t.Fatalf("compared %d provider payments, want %d", rep.ComparedProvider, n+1)
	}
}

// A local payment created inside the window whose provider object was created well before it
// (a record written from a late webhook) is fetched by id, not called missing.
func TestWindowEdgeFetchesByID(t *testing.T) {
	e := newEnv(t)
	start := e.clock.Now()
	p := e.pay(700, "", nil)
	e.clock.Advance(30 * time.Hour)
	p.CreatedAt = e.clock.Now().Add(-time.Hour) // our record's time, inside the next window
	p.Version = 2
	e.write(p)
	e.clock.Advance(10 * time.Minute)
	w := e.rec.DefaultWindow()
	if !w.From.After(start.Add(recon.DefaultMargin)) {
		t.Fatalf("window %v should start well after the provider object (%v)", w, start)
	}
	rep := e.run()
	if total(rep.Found) != 0 || rep.ComparedProvider != 1 {
		t.Fatalf("found %v, compared %d provider payments; want nothing and 1", rep.Found, rep.ComparedProvider)
	}
	// What was fetched is compared: a changed amount on it is found by the next run.
	e.sim("POST", "/_sim/payment_intents/"+p.ProviderPaymentID+"/mutate", map[string]any{"amount": 701}, nil)
	e.clock.Advance(time.Hour)
	if rep := e.run(); rep.Found[recon.AmountMismatch] != 1 || total(rep.Found) != 1 {
		t.Fatalf("after the change: found %v", rep.Found)
	}
}

// The metrics are EMF lines CloudWatch can read: one per class and one for the run.
func TestMetricsAreEMF(t *testing.T) {
	e := newEnv(t)
	e.sim("POST", "/_sim/payment_intents", map[string]any{"amount": 500, "currency": "usd"}, nil)
	e.clock.Advance(time.Hour)
	rep := e.run()
	lines := bytes.Split(bytes.TrimSpace(e.metrics.Bytes()), []byte("\n"))
	if len(lines) != len(recon.Kinds)+1 {
		t.Fatalf("%d metric lines, want %d", len(lines), len(recon.Kinds)+1)
	}
	var first struct {
		AWS struct {
			Timestamp         int64
			CloudWatchMetrics []struct {
				Namespace  string
				Dimensions [][]string
				Metrics    []struct{ Name, Unit string }
			}
		} `json:"_aws"`
		Class          string
		Differences    int
		NewDifferences int
	}
	if err := json.Unmarshal(lines[0], &first); err != nil {
		t.Fatal(err)
	}
	m := first.AWS.CloudWatchMetrics
	if first.AWS.Timestamp != rep.FinishedAt.UnixMilli() || len(m) != 1 || m[0].Namespace != metrics.Namespace ||
		first.Class != string(recon.MissingLocally) || first.Differences != 1 || first.NewDifferences != 1 {
		t.Fatalf("first line %s", lines[0])
	}
	e.run() // a replay emits nothing more
	if n := bytes.Count(e.metrics.Bytes(), []byte("\n")); n != len(lines) {
		t.Fatalf("replay emitted metrics: %d lines", n)
	}
}

// A payment left pending with no provider payment (its create never reached the provider, and
// nothing resolved it) is reported as stuck by the run whose window holds the end of its
// bound, through the store's created-time index, and opened once however many runs find it.
func TestStuckPendingPaymentIsReported(t *testing.T) {
	e := newEnv(t)
	made := e.clock.Now()
	e.write(payments.Payment{ID: "pay_stuck", Scope: "test", Status: provider.StatusPending, Amount: 2000, Currency: "usd",
		Customer: "cus_1", CreatedAt: made, UpdatedAt: made, Version: 1})
	e.clock.Advance(20 * time.Hour) // within its bound: not stuck yet
	if rep := e.run(); rep.Found[recon.Stuck] != 0 {
		t.Fatalf("stuck before its bound: %v", rep.Found)
	}
	for range 30 { // hourly runs past the bound and beyond the window that held it
		e.clock.Advance(time.Hour)
		e.run()
	}
	var stuck []recon.Difference
	for _, d := range e.sink.all() {
		if d.Kind == recon.Stuck {
			stuck = append(stuck, d)
		}
	}
	if len(stuck) != 1 || stuck[0].PaymentID != "pay_stuck" || !strings.Contains(stuck[0].Explanation, "pending since") {
		t.Fatalf("stuck differences opened: %+v", stuck)
	}
}
