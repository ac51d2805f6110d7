package inprocess_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runtwice/twice/infra/providersim/stripesim"
	"github.com/runtwice/twice/shared/apigw"
	"github.com/runtwice/twice/shared/attempts"
	"github.com/runtwice/twice/shared/boltstore"
	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/declines"
	"github.com/runtwice/twice/shared/idempotency"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/queue"
	"github.com/runtwice/twice/shared/recovery"
	"github.com/runtwice/twice/shared/retry"
	"github.com/runtwice/twice/shared/sqsbatch"
	"github.com/runtwice/twice/shared/store"
	"github.com/runtwice/twice/shared/stripeprovider"
	"github.com/runtwice/twice/shared/webhooks"
	"github.com/runtwice/twice/shared/webhooks/ingest"
	"github.com/runtwice/twice/shared/webhooks/signature"
	"github.com/runtwice/twice/shared/webhooks/worker"
)

// TestEachWayEntersAPackageOnce follows POST /payments and one webhook delivery (ingest, then
// the worker) through the packages as the functions wire them, and fails when a package is
// entered again below another on the same call stack: a wrapper around a handler that the
// handler's work calls back into (apigw -> attempts -> apigw, attempts -> ... -> attempts).
// Two shapes stand: the idempotency keeper calling back the operation it keeps (payments ->
// idempotency -> payments), and a leaf accessor such as apigw.Scope that calls nothing on.
// TWICE_WAY=1 prints each way.
func TestEachWayEntersAPackageOnce(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	bolt, err := boltstore.Open(filepath.Join(t.TempDir(), "twice.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bolt.Close() })
	sim, err := stripesim.New(stripesim.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim)
	t.Cleanup(func() { srv.Close(); sim.Close() })

	// POST /payments, as functions/payments-api and functions/internal/paymentsfn wire it.
	pay := &tracer{}
	st := tracedStore{Store: bolt, t: pay}
	attemptLog, err := attempts.NewLog(attempts.Log{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	client, err := stripeprovider.New(stripeprovider.Client{APIKey: stripesim.DefaultAPIKey, BaseURL: srv.URL,
		Observer: attempts.StripeObserver{Record: attempts.BestEffort(attemptLog, log)}})
	if err != nil {
		t.Fatal(err)
	}
	keeper, err := idempotency.NewKeeper(idempotency.Keeper{Store: st, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	svc := &payments.Service{Store: st, Keeper: keeper, Classify: declines.ClassOf, Log: log,
		Provider:  &retry.Provider{Next: client, Policy: retry.NewAPI(retry.Policy{Rand: rand.New(rand.NewPCG(1, 2)), Log: log})},
		Exchanges: attempts.API{Record: attempts.BestEffort(attemptLog, log)}}
	scope := func(r *http.Request) string { pay.capture("apigw.Scope"); return apigw.Scope(r) }
	resp, err := (&apigw.Adapter{Handler: apigw.RequireScope(svc.Handler(scope))}).Invoke(ctx, events.APIGatewayV2HTTPRequest{
		RawPath: "/payments", RouteKey: "POST /payments",
		Headers: map[string]string{"content-type": "application/json", "idempotency-key": "order-1"},
		Body:    `{"amount":2000,"currency":"usd","customer":"cus_1","payment_method":"pm_card_visa"}`,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", Path: "/payments"},
			Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
				JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"sub": "client-1"}}}}})
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /payments: %d %v %s", resp.StatusCode, err, resp.Body)
	}
	pay.check(t, "POST /payments")

	// The provider's event for that payment, signed as Stripe signs it.
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/events?type=payment_intent.succeeded", nil)
	req.SetBasicAuth(stripesim.DefaultAPIKey, "")
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var list struct{ Data []json.RawMessage }
	err = json.NewDecoder(r.Body).Decode(&list)
	r.Body.Close()
	if err != nil || len(list.Data) != 1 {
		t.Fatalf("events: %v, %d", err, len(list.Data))
	}
	body := []byte(list.Data[0])

	// One delivery through functions/webhook-ingest.
	in := &tracer{}
	inLog, err := attempts.NewLog(attempts.Log{Store: tracedStore{Store: bolt, t: in}})
	if err != nil {
		t.Fatal(err)
	}
	v, err := signature.NewStripeVerifier(signature.StripeVerifier{Secrets: []string{stripesim.DefaultWebhookSecret}})
	if err != nil {
		t.Fatal(err)
	}
	q := &tracedQueue{t: in}
	mux := http.NewServeMux()
	mux.Handle(ingest.Pattern, &ingest.Handler{Verifiers: webhooks.Static{webhooks.ProviderStripe: v}, Queue: ingest.QueueSink{Queue: q},
		MaxBody: 180 << 10, Log: log, Observer: attempts.IngestObserver{Record: attempts.BestEffort(inLog, log)}})
	resp, err = (&apigw.Adapter{Handler: mux}).Invoke(ctx, events.APIGatewayV2HTTPRequest{
		RawPath: "/webhooks/stripe", RouteKey: "POST /webhooks/{provider}", Body: string(body),
		Headers: map[string]string{"content-type": "application/json",
			"stripe-signature": stripesim.SignatureHeader(body, stripesim.DefaultWebhookSecret, time.Now())},
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", Path: "/webhooks/stripe"}}})
	if err != nil || resp.StatusCode != http.StatusOK || len(q.sent) != 1 {
		t.Fatalf("ingest: %d %v %s", resp.StatusCode, err, resp.Body)
	}
	in.check(t, "webhook ingest")

	// The same delivery through functions/webhook-worker.
	wk := &tracer{}
	wst := tracedStore{Store: bolt, t: wk}
	w := &worker.Worker{Applier: &payments.Applier{Store: wst, Classify: declines.ClassOf,
		Steer: recovery.SteerMessages, Replan: recovery.ReplanMessages, Log: log}}
	retries := &deadletter.Retries{Loop: &deadletter.Records{Store: wst, Log: log}, Log: log,
		Done: deadletter.WorkerDone, Failed: deadletter.WorkerFailed}
	out, err := (&sqsbatch.Batch{Each: w.Handle, Report: retries, Log: log}).Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{{
		MessageId: "m-1", Body: string(q.sent[0]), EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:webhooks",
		Attributes: map[string]string{"ApproximateReceiveCount": "1"}}}})
	if err != nil || len(out.BatchItemFailures) != 0 {
		t.Fatalf("worker: %+v %v", out, err)
	}
	wk.check(t, "webhook worker")
	if p, err := payments.Get(ctx, bolt, payments.PaymentID("jwt:client-1", "order-1")); err != nil || p.Status != provider.StatusSucceeded {
		t.Fatalf("payment after its webhook: %+v %v", p, err)
	}
}

// tracer keeps the call stacks seen at a way's leaves (store calls, queue sends, accessors),
// as this module's functions, outermost first.
type tracer struct {
	mu     sync.Mutex
	stacks [][]string
}

var closureSuffix = regexp.MustCompile(`(\.func\d+)+(\.\d+)*$|\.\d+$`)

func (t *tracer) capture(leaf string) {
	pcs := make([]uintptr, 128)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	var st []string
	for {
		f, more := frames.Next()
		if strings.HasPrefix(f.Function, "github.com/runtwice/twice/") && !strings.HasSuffix(f.File, "_test.go") {
			name := f.Function[strings.LastIndex(f.Function, "/")+1:]
			name = closureSuffix.ReplaceAllString(strings.NewReplacer("(*", "", ")", "").Replace(name), "")
			// A closure inlined into a test is named after the test: name it after its file's package.
			if dir := filepath.Base(filepath.Dir(f.File)); !strings.HasPrefix(name, dir+".") {
				if i := strings.Index(name, ".Test"); i >= 0 {
					if _, rest, ok := strings.Cut(name[i+1:], "."); ok {
						name = dir + "." + rest
					}
				}
			}
			if len(st) == 0 || st[len(st)-1] != name {
				st = append(st, name)
			}
		}
		if !more {
			break
		}
	}
	for i, j := 0, len(st)-1; i < j; i, j = i+1, j-1 {
		st[i], st[j] = st[j], st[i]
	}
	t.mu.Lock()
	t.stacks = append(t.stacks, append(st, "· "+leaf))
	t.mu.Unlock()
}

// reentries lists, for each stack, a package entered again below another one, the keeper's
// callback and leaf accessors excepted.
func (t *tracer) reentries() []string {
	var out []string
	for _, st := range t.stacks {
		var runs []string // packages, consecutive repeats collapsed; the leaf is left out
		for _, f := range st[:len(st)-1] {
			if p := pkgOf(f); len(runs) == 0 || runs[len(runs)-1] != p {
				runs = append(runs, p)
			}
		}
		seen := map[string]int{}
		for i, p := range runs {
			if j, ok := seen[p]; ok && !(p == "payments" && i == j+2 && runs[j+1] == "idempotency") {
				out = append(out, strings.Join(runs, " > "))
				break
			}
			seen[p] = i
		}
	}
	return out
}

func pkgOf(frame string) string { p, _, _ := strings.Cut(frame, "."); return p }

// check fails on a re-entry and, with TWICE_WAY=1, prints the way: the stacks merged into one
// tree in the order of calls.
func (t *tracer) check(tb testing.TB, name string) {
	tb.Helper()
	if len(t.stacks) == 0 {
		tb.Fatalf("%s: no stack seen", name)
	}
	for _, r := range t.reentries() {
		tb.Errorf("%s enters a package twice: %s", name, r)
	}
	if os.Getenv("TWICE_WAY") == "" {
		return
	}
	type node struct {
		name string
		kids []*node
	}
	root := &node{}
	for _, st := range t.stacks {
		n := root
		for _, f := range st {
			var next *node
			for _, k := range n.kids {
				if k.name == f {
					next = k
				}
			}
			if next == nil {
				next = &node{name: f}
				n.kids = append(n.kids, next)
			}
			n = next
		}
	}
	var b strings.Builder
	var walk func(n *node, depth int)
	walk = func(n *node, depth int) {
		for _, k := range n.kids {
			fmt.Fprintf(&b, "%s%s\n", strings.Repeat("  ", depth), k.name)
			walk(k, depth+1)
		}
	}
	walk(root, 0)
	fmt.Printf("== %s\n%s\n", name, b.String())
}

// tracedStore captures the stack of every store call.
type tracedStore struct {
	store.Store
	t *tracer
}

func (s tracedStore) Get(ctx context.Context, table, pk, sk string) (store.Item, error) {
	s.t.capture("store.Get " + table)
	return s.Store.Get(ctx, table, pk, sk)
}

func (s tracedStore) Put(ctx context.Context, table string, it store.Item, c store.Cond) error {
	s.t.capture("store.Put " + table)
	return s.Store.Put(ctx, table, it, c)
}

func (s tracedStore) Replace(ctx context.Context, table string, it store.Item, c store.Cond) (*store.Item, error) {
	s.t.capture("store.Replace " + table)
	return s.Store.Replace(ctx, table, it, c)
}

func (s tracedStore) Transact(ctx context.Context, ws ...store.Write) error {
	tables := make([]string, len(ws))
	for i, w := range ws {
		tables[i] = w.Table
	}
	s.t.capture("store.Transact " + strings.Join(tables, ","))
	return s.Store.Transact(ctx, ws...)
}

func (s tracedStore) PutAll(ctx context.Context, table string, items ...store.Item) error {
	s.t.capture("store.PutAll " + table)
	return s.Store.PutAll(ctx, table, items...)
}

func (s tracedStore) Delete(ctx context.Context, table, pk, sk string, c store.Cond) error {
	s.t.capture("store.Delete " + table)
	return s.Store.Delete(ctx, table, pk, sk, c)
}

func (s tracedStore) Query(ctx context.Context, q store.Query) (store.Page, error) {
	s.t.capture("store.Query " + q.Table)
	return s.Store.Query(ctx, q)
}

// tracedQueue captures the stack of every send and keeps the bodies.
type tracedQueue struct {
	t    *tracer
	sent [][]byte
}

func (q *tracedQueue) Send(ctx context.Context, body []byte, opts queue.SendOptions) (string, error) {
	q.t.capture("queue.Send")
	q.sent = append(q.sent, body)
	return fmt.Sprintf("m-%d", len(q.sent)), queue.CheckSend(body, opts)
}
