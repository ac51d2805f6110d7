package inprocess

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/runtwice/twice/infra/asl"
	"github.com/runtwice/twice/infra/localqueue"
	"github.com/runtwice/twice/infra/providersim/stripesim"
	"github.com/runtwice/twice/shared/attempts"
	"github.com/runtwice/twice/shared/backfill"
	"github.com/runtwice/twice/shared/boltgroup"
	"github.com/runtwice/twice/shared/boltstore"
	"github.com/runtwice/twice/shared/clock"
	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/declines"
	"github.com/runtwice/twice/shared/feed"
	"github.com/runtwice/twice/shared/idempotency"
	"github.com/runtwice/twice/shared/opsapi"
	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/outbox/followon"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/payments/resolvequeue"
	"github.com/runtwice/twice/shared/problem"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/queue"
	"github.com/runtwice/twice/shared/recon"
	"github.com/runtwice/twice/shared/recovery"
	"github.com/runtwice/twice/shared/redact"
	"github.com/runtwice/twice/shared/retry"
	"github.com/runtwice/twice/shared/secrets"
	"github.com/runtwice/twice/shared/sqsbatch"
	"github.com/runtwice/twice/shared/stripeprovider"
	"github.com/runtwice/twice/shared/webhooks"
	"github.com/runtwice/twice/shared/webhooks/ingest"
	"github.com/runtwice/twice/shared/webhooks/signature"
	"github.com/runtwice/twice/shared/webhooks/worker"
	"github.com/runtwice/twice/statemachines"
)

// Defaults of the local contract (DESIGN.md "Local contract").
const (
	DefaultAddr                  = "127.0.0.1:3000"
	DefaultSimAddr               = stripesim.DefaultAddr
	DefaultDataDir               = ".twice"
	DefaultStripeWebhookSecret   = stripesim.DefaultWebhookSecret
	DefaultStandardWebhookSecret = "whsec_dHdpY2UtbG9jYWwtc3RhbmRhcmQtc2VjcmV0" // base64("twice-local-standard-secret")
	DefaultOperatorToken         = "twice-local-operator-token"
	DefaultStripeAPIKey          = stripesim.DefaultAPIKey
)

// Queue names, as the template names the SQS queues.
const (
	webhookQueue    = "webhooks"
	webhookDLQ      = "webhooks-dlq"
	resolveQueue    = "resolve"
	resolveDLQ      = "resolve-dlq"
	maxReceiveCount = 5
	// resolveVisibility is the resolve queue's visibility timeout: the wait of a failed job.
	resolveVisibility = 10 * time.Second
)

// ingestMaxBody keeps a webhook delivery, base64 inside its JSON queue message, under SQS's
// 256 KiB message limit.
const ingestMaxBody = 180 << 10

// Config configures a Stack. Zero values take the defaults above.
type Config struct {
	Addr    string // the API; ":0"-style addresses pick a free port
	SimAddr string // the provider simulator
	DataDir string

	StripeWebhookSecret   string
	StandardWebhookSecret string
	OperatorToken         string
	StripeAPIKey          string

	// ProviderTimeout bounds one provider call (default 3 s); past it the outcome is unknown and
	// the payment is resolved in the background.
	ProviderTimeout time.Duration
	// TimeFactor runs each payment recovery's clock (its plans, its Waits, its caps) this many
	// times faster than the stack's (default 1), from the moment that recovery starts, so a
	// recovery planned days ahead happens in seconds, on any day and however long the stack
	// has been up. Everything else keeps the stack's time: webhook signatures, idempotency
	// locks and reconciliation windows are about real seconds. Each recovery's clock is kept
	// with its execution, so a restart continues its timeline.
	TimeFactor float64
	// ClockStart, when set, starts the stack's clocks at that instant instead of the wall
	// clock's: a testing and demo aid, so a run does not depend on the day it happens (with
	// TimeFactor, recovery runs from there). It is kept with the data directory: a restart
	// continues the same timeline, and another start on the same directory is refused
	// (ErrClockStartConflict).
	ClockStart time.Time
	// RefundFailureDelay is how long after its creation the simulator fails a refund of
	// pm_card_refundFail (default stripesim.DefaultRefundFailureDelay).
	RefundFailureDelay time.Duration
	// ResolveDelay is the wait before a background resolve of an unknown outcome (default 2 s).
	ResolveDelay time.Duration
	// RequestTimeout is each API request's deadline (default 29 s, API Gateway's limit). An
	// idempotency lock lasts until the deadline plus a margin, so after a crash a retry waits
	// at most that long for the orphaned lock.
	RequestTimeout time.Duration
	// LockMargin is added to the request deadline for the lock's expiry (default 5 s).
	LockMargin time.Duration
	// ReconcileEvery is the reconciliation schedule (default 1 h, as in template.yaml; a
	// negative value turns it off). POST /ops/reconcile runs one on demand.
	ReconcileEvery time.Duration
	// ReconcileGrace is how old a difference must be to count (default 10 min): younger
	// pending payments and unmatched provider payments may still be settling.
	ReconcileGrace time.Duration
	// CustomerWindow is how long a payment may wait in requires_action for its customer
	// before reconciliation cancels it at the provider (default
	// payments.DefaultCustomerWindow, as the reconciler function's TWICE_CUSTOMER_WINDOW).
	CustomerWindow time.Duration
	// CaptureWindow is how long an authorization may stay uncaptured before reconciliation
	// reports it for an operator to capture or cancel (default payments.DefaultCaptureWindow);
	// the chaos run shortens it so an authorization it leaves alone is surfaced within the run.
	CaptureWindow time.Duration
	// BackfillMaxEvents bounds one backfill pass (default backfill.MaxEvents); a longer
	// backlog continues from the cursor next pass.
	BackfillMaxEvents int
	// Throttle is the share of the stack's calls to its store, queues, runner, event feed and
	// provider that are refused as the services refuse a throttled call (throttle.go); 0: none.
	Throttle float64

	// ReadTimeout bounds reading a whole request, headers and body (default 10 s), so a body
	// sent a byte at a time cannot hold a connection open; WriteTimeout bounds a request
	// from the end of its headers to the end of its answer (default RequestTimeout + 10 s);
	// IdleTimeout closes a keep-alive connection with no request (default 60 s).
	ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// OperatorFailures are the limits on failed operator logins and bearer tokens per source
	// IP (opsapi.FailureLimiter's defaults: 10 a minute; its Clock defaults to the stack's).
	OperatorFailures opsapi.FailureLimiter

	Log *slog.Logger

	// wrapStore, set by a test, wraps the embedded store every component uses: a recorder
	// of the keys each flow writes.
	wrapStore func(localStore) localStore
}

func (c *Config) defaults() {
	def := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	def(&c.Addr, DefaultAddr)
	def(&c.SimAddr, DefaultSimAddr)
	def(&c.DataDir, DefaultDataDir)
	def(&c.StripeWebhookSecret, DefaultStripeWebhookSecret)
	def(&c.StandardWebhookSecret, DefaultStandardWebhookSecret)
	def(&c.OperatorToken, DefaultOperatorToken)
	def(&c.StripeAPIKey, DefaultStripeAPIKey)
	if c.ProviderTimeout <= 0 {
		c.ProviderTimeout = 3 * time.Second
	}
	if c.TimeFactor <= 0 {
		c.TimeFactor = 1
	}
	if c.ResolveDelay <= 0 {
		c.ResolveDelay = 2 * time.Second
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 29 * time.Second
	}
	if c.ReadTimeout <= 0 {
		c.ReadTimeout = 10 * time.Second
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = c.RequestTimeout + 10*time.Second
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 60 * time.Second
	}
	if c.LockMargin <= 0 {
		c.LockMargin = 5 * time.Second
	}
	if c.ReconcileEvery == 0 {
		c.ReconcileEvery = time.Hour
	}
	if c.Log == nil {
		c.Log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
}

// Stack is the local stack: every function behind one server.
type Stack struct {
	cfg   Config
	log   *slog.Logger
	clock *clock.Accelerated

	store    localStore
	throttle *throttler
	broker   *localqueue.Broker
	queues   map[string]*localqueue.Queue
	sim      *stripesim.Simulator
	attempts *attempts.Log
	// exchanges files the API exchanges behind their answers (attempts.API).
	exchanges *attempts.Background
	payments  *payments.Service
	worker    *worker.Worker
	runner    *asl.Runner
	// recoverer starts recoveries; deadletters is the dead-letter table; recon reconciles.
	recoverer   *recovery.Recoverer
	deadletters *deadletter.Records
	recon       *recon.Reconciler
	// backfill replays the provider's event log through the worker (before each scheduled
	// reconciliation, and on demand: POST /ops/backfill).
	backfill *backfill.Backfill
	// feed is the outbound event feed (GET /events), filled by the relay from the outbox.
	feed *feed.Log
	// starter is the runner's StartExecution with armable faults; relay delivers the outbox.
	starter *faultyStarter
	relay   *outbox.Relay
	// resumer starts the executions that resume parked recoveries.
	resumer *asl.Starter
	// failures throttles failed operator credentials per source, on every route that takes them.
	failures *opsapi.FailureLimiter

	apiLn, simLn   net.Listener
	apiSrv, simSrv *http.Server

	cancel context.CancelFunc
	wg     sync.WaitGroup
	// stopSimTrim stops keeping the simulator's file out of the resident set.
	stopSimTrim func()
}

// New opens the data directory and builds the stack; Start serves it.
func New(cfg Config) (*Stack, error) {
	cfg.defaults()
	// Every log line goes out redacted and capped, whichever package writes it.
	cfg.Log = slog.New(redact.LogHandler(cfg.Log.Handler()))
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, err
	}
	s := &Stack{cfg: cfg, log: cfg.Log, queues: map[string]*localqueue.Queue{}}
	var err error
	if s.clock, err = newClock(cfg.DataDir, cfg.ClockStart); err != nil {
		return nil, err
	}
	limits := cfg.OperatorFailures
	if limits.Clock == nil {
		limits.Clock = s.clock
	}
	if limits.Log == nil {
		limits.Log = s.log
	}
	s.failures = opsapi.NewFailureLimiter(limits)
	// Listen first, so the simulator knows where to send webhooks even on a ":0" address.
	if s.apiLn, err = net.Listen("tcp", cfg.Addr); err != nil {
		return nil, fmt.Errorf("inprocess: listen %s: %w", cfg.Addr, err)
	}
	if s.simLn, err = net.Listen("tcp", cfg.SimAddr); err != nil {
		s.apiLn.Close()
		return nil, fmt.Errorf("inprocess: listen %s: %w", cfg.SimAddr, err)
	}
	if err := s.build(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Stack) build() error {
	bs, err := boltstore.Open(filepath.Join(s.cfg.DataDir, "twice.db"))
	if err != nil {
		return err
	}
	s.store, s.throttle = bs, newThrottler(s.cfg.Throttle)
	if s.cfg.Throttle > 0 {
		s.store = newThrottledStore(s.store, s.throttle)
	}
	if s.cfg.wrapStore != nil {
		s.store = s.cfg.wrapStore(s.store)
	}
	// One group committer for the one file: store writes, queue changes and the runner's
	// checkpoints share fsyncs (shared/boltgroup).
	s.broker = localqueue.New(s.store.DB(), localqueue.Options{Committer: s.store.Committer()})
	for name, dlq := range map[string]string{webhookQueue: webhookDLQ, resolveQueue: resolveDLQ} {
		q, err := s.broker.Queue(name, localqueue.Config{DeadLetter: dlq, MaxReceiveCount: maxReceiveCount})
		if err != nil {
			return err
		}
		s.queues[name] = q
		if s.queues[dlq], err = s.broker.Queue(dlq, localqueue.Config{}); err != nil {
			return err
		}
	}

	// The simulator stands in for a remote provider. Its file must survive the process being
	// killed, which the page cache gives without an fsync, and its flushes must not take the
	// disk from the stack's own store (docs/performance.md): so NoSync.
	s.sim, err = stripesim.New(stripesim.Config{
		DataDir:            s.cfg.DataDir,
		APIKeys:            []string{s.cfg.StripeAPIKey},
		WebhookURL:         "http://" + s.apiLn.Addr().String() + "/webhooks/stripe",
		WebhookSecret:      s.cfg.StripeWebhookSecret,
		RefundFailureDelay: s.cfg.RefundFailureDelay,
		ThrottleRate:       s.cfg.Throttle,
		NoSync:             true, // see above
		Now:                s.clock.Now,
		Log:                s.log.With("component", "providersim"),
	})
	if err != nil {
		return err
	}
	s.stopSimTrim = boltstore.KeepTrimmed(s.sim.DB())

	if s.attempts, err = attempts.NewLog(attempts.Log{Store: s.store, Now: s.clock.Now}); err != nil {
		return err
	}
	record := attempts.BestEffort(s.attempts, s.log)
	s.exchanges = attempts.NewBackground(s.attempts, s.log, 0)

	client, err := stripeprovider.New(stripeprovider.Client{
		APIKey:   s.cfg.StripeAPIKey,
		BaseURL:  "http://" + s.simLn.Addr().String(),
		Timeout:  s.cfg.ProviderTimeout,
		Observer: attempts.StripeObserver{Record: record},
		Now:      s.clock.Now,
	})
	if err != nil {
		return err
	}
	seed := uint64(time.Now().UnixNano())
	// An unknown outcome on the API path is resolved in the background, not retried while the
	// caller waits, as in AWS.
	policy := retry.NewAPI(retry.Policy{Rand: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), Log: s.log})
	prov := &retry.Provider{Next: client, Policy: policy}

	keeper, err := idempotency.NewKeeper(idempotency.Keeper{Store: s.store, LockMargin: s.cfg.LockMargin, Now: s.clock.Now,
		Log: s.log})
	if err != nil {
		return err
	}
	// The dead-letter table as the recovery steps, reconciliation and the consumers use it; the
	// operator's table, whose retries go back to those parts, is made from it once they exist.
	records := &deadletter.Records{Store: s.store, Now: s.clock.Now, Log: s.log}
	recoverer, err := s.buildRecovery(client, seed, records)
	if err != nil {
		return err
	}
	s.recoverer = recoverer
	// One applier takes deliveries (the webhook worker), backfilled events and what
	// reconciliation heals.
	applier := &payments.Applier{Store: s.store, Classify: declines.ClassOf, Steer: recovery.SteerMessages,
		Replan: recovery.ReplanMessages, Now: s.clock.Now, Log: s.log}
	s.worker = &worker.Worker{Applier: applier}
	readPolicy := retry.New(retry.Policy{Rand: rand.New(rand.NewPCG(seed+4, seed^0x3c6ef372fe94f82b)), Log: s.log})
	reads := &retry.Provider{Next: client, Policy: readPolicy}
	s.recon = &recon.Reconciler{Store: s.store, Provider: reads,
		Sink: recon.DeadLetterRecords{Records: records}, Log: s.log, Now: s.clock.Now, Grace: s.cfg.ReconcileGrace,
		Events: reads, Healer: applier, Bounds: payments.Bounds{CustomerWindow: s.cfg.CustomerWindow, CaptureWindow: s.cfg.CaptureWindow}}
	// An operator's retry goes back to the queue a message died on, starts a new recovery
	// round, or runs reconciliation again and closes the record's loop with the result. As in
	// AWS, the retry is an outbox message committed with the record, which the relay below
	// sends with this table's Requeuer.
	queues := map[string]deadletter.Sender{}
	for name, q := range s.queues {
		queues[name] = q
	}
	s.deadletters = &deadletter.Records{Store: s.store, Now: s.clock.Now, Log: s.log, Requeuer: deadletter.ByTarget{
		deadletter.TargetQueue:     deadletter.QueueRequeuer{Queues: queues},
		deadletter.TargetRecovery:  recovery.Requeuer{Store: s.store, Recoverer: recoverer},
		deadletter.TargetReconcile: recon.Requeuer{Run: s.recon.Handle, Loop: records},
	}}
	s.payments = &payments.Service{Store: s.store, Keeper: keeper, Provider: prov,
		Resolver: &payments.QueueResolver{Queue: s.throttled(s.queues[resolveQueue]), Delay: s.cfg.ResolveDelay},
		Classify: declines.ClassOf, OnDecline: recoverer, Exchanges: attempts.API{Record: s.exchanges.Record, Now: s.clock.Now}, Now: s.clock.Now, Log: s.log}
	// The relay delivers every follow-on kind to the same targets as outbox-relay in AWS
	// (followon.Handlers), on the local runner, queues and event feed.
	s.feed = &feed.Log{Store: s.store}
	handlers, err := followon.Handlers(followon.Targets{Payments: s.payments, Steerer: s.steerer(), DeadLetters: s.deadletters,
		WebhookQueue: s.queues[webhookQueue], Publisher: &feed.Publisher{Store: s.store, Sink: newThrottledSink(s.feed, s.throttle), Log: s.log}})
	if err != nil {
		return err
	}
	s.relay = &outbox.Relay{Store: s.store, Handlers: handlers, Now: s.clock.Now,
		Base: 100 * time.Millisecond, Cap: 10 * time.Second, Lanes: relayLanes, Rand: rand.New(rand.NewPCG(seed+5, seed^0x510e527fade682d1)), Log: s.log}
	s.backfill = &backfill.Backfill{Store: s.store, Events: reads, Applier: applier, MaxEvents: s.cfg.BackfillMaxEvents,
		Now: s.clock.Now, Log: s.log}
	return nil
}

// recoveryMachine is the state machine's local name; recoveryStepsARN stands in for the
// recovery-steps function's ARN in the definition.
const (
	recoveryMachine  = "payment-recovery"
	recoveryStepsARN = "arn:aws:lambda:local:000000000000:function:recovery-steps"
)

// buildRecovery runs payment-recovery.asl.json on the local runner, its tasks on the same
// recovery steps the recovery-steps function runs, and returns what starts a recovery.
func (s *Stack) buildRecovery(client provider.Provider, seed uint64, deadletters *deadletter.Records) (*recovery.Recoverer, error) {
	// Recovery charges carry an attempt key, so an unknown outcome may be repeated inline.
	policy := retry.New(retry.Policy{Rand: rand.New(rand.NewPCG(seed+1, seed^0x6a09e667f3bcc909)), Log: s.log})
	steps, err := recovery.NewSteps(recovery.Steps{
		Provider:    &retry.Provider{Next: client, Policy: policy},
		Store:       s.store,
		DeadLetters: recovery.DeadLetterRecords{Records: deadletters},
		Policy:      recovery.DefaultPolicy(),
		Now:         s.clock.Now, // each recovery's own, faster time comes with its steps' input
		TimeFactor:  s.cfg.TimeFactor,
		Rand:        rand.New(rand.NewPCG(seed+2, seed^0xbb67ae8584caa73b)),
		Log:         s.log,
	})
	if err != nil {
		return nil, err
	}
	checkpoints, err := asl.NewBoltStore(s.store.DB(), asl.WithCommitter(s.store.Committer()))
	if err != nil {
		return nil, err
	}
	s.runner = asl.New(checkpoints, asl.TaskRegistry{recoveryStepsARN: recovery.LambdaHandler(steps.Handle)},
		asl.WithClock(s.clock), asl.WithTimeFactor(s.cfg.TimeFactor), asl.WithLogger(s.log), asl.WithRand(rand.New(rand.NewPCG(seed+3, seed))))
	def := asl.Substitute(statemachines.PaymentRecovery, map[string]string{statemachines.RecoveryStepsFunctionArn: recoveryStepsARN})
	if err := s.runner.Define(recoveryMachine, def); err != nil {
		return nil, err
	}
	s.starter = &faultyStarter{next: newThrottledStarter(s.runner, s.throttle)}
	// A resumed recovery goes on from the workflow's time it waited for, on its own clock.
	s.resumer = &asl.Starter{Runner: s.starter, StateMachine: recoveryMachine, ClockStart: func(input []byte) time.Time {
		var in recovery.ResumeInput
		if json.Unmarshal(input, &in) != nil || in.Resume == "" {
			return time.Time{}
		}
		return in.WorkflowTime(s.clock.Now(), s.cfg.TimeFactor)
	}}
	return &recovery.Recoverer{Starter: &asl.Starter{Runner: s.starter, StateMachine: recoveryMachine}, Log: s.log}, nil
}

// Handler is every route of template.yaml. The adapters it wires (QueueSink, QueueResolver,
// the attempt observers) are the ones functions/*/main.go wires to the AWS services.
func (s *Stack) Handler() http.Handler {
	mux := http.NewServeMux()
	local := func(*http.Request) string { return "local" }
	pay := s.payments.Handler(local)
	for _, route := range payments.Routes() {
		mux.Handle(route, pay)
	}

	verifiers := webhooks.Static{}
	if v, err := signature.NewStripeVerifier(signature.StripeVerifier{Secrets: secrets.Split(s.cfg.StripeWebhookSecret), Now: s.clock.Now}); err == nil {
		verifiers[webhooks.ProviderStripe] = v
	} else {
		s.log.Error("stripe webhook secret rejected; /webhooks/stripe will answer 503", "error", err)
	}
	if v, err := signature.NewStandardVerifier(signature.StandardVerifier{Secrets: secrets.Split(s.cfg.StandardWebhookSecret), Now: s.clock.Now}); err == nil {
		verifiers[webhooks.ProviderStandard] = v
	} else {
		s.log.Error("standard webhook secret rejected; /webhooks/standard will answer 503", "error", err)
	}
	in := &ingest.Handler{Verifiers: verifiers, Queue: ingest.QueueSink{Queue: s.throttled(s.queues[webhookQueue])}, MaxBody: ingestMaxBody,
		Now: s.clock.Now, Log: s.log, Observer: attempts.IngestObserver{Record: attempts.BestEffort(s.attempts, s.log)}}
	mux.Handle(ingest.Pattern, in)
	ops, err := opsapi.New(opsapi.Handler{Records: s.deadletters, Attempts: freshAttempts{s.attempts, s.exchanges}, Token: s.cfg.OperatorToken,
		Now: s.clock.Now, Log: s.log, Reconcile: s.recon, Failures: s.failures,
		CallerScope: "local", PaymentIDFor: payments.PaymentID, Payments: opsapi.StorePayments{Store: s.store},
		Recoveries: opsapi.StorePayments{Store: s.store}, Steer: s.operatorSteerer()})
	if err != nil {
		s.log.Error("operator API disabled", "error", err)
	} else {
		mux.Handle("/ops/", ops)
	}
	mux.Handle("/ops/_faults", s.faultsHandler())
	mux.Handle("POST /ops/backfill", s.backfillHandler())
	mux.Handle("GET /events", s.feedHandler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
	return mux
}

// Start serves the API and the simulator and starts the background work: webhook delivery
// from the simulator, the queue consumers and the runner.
func (s *Stack) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.apiSrv = s.server(withDeadline(s.Handler(), s.cfg.RequestTimeout))
	// The simulator keeps no read or write deadline: its latency fault waits up to 120 s before
	// it reads a request's body, and timeout_after_effect holds a connection up to 60 s.
	s.simSrv = &http.Server{Handler: s.sim, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: s.cfg.IdleTimeout}
	s.goRun(func() { s.apiSrv.Serve(s.apiLn) })
	s.goRun(func() { s.simSrv.Serve(s.simLn) })
	s.sim.Start(ctx)

	// A message an operator retried closes its dead-letter record's loop (deadletter.Retries,
	// beside each consumer in its batch, as in AWS).
	workerRetries := &deadletter.Retries{Loop: s.deadletters, Now: s.clock.Now, Log: s.log,
		Done: deadletter.WorkerDone, Failed: deadletter.WorkerFailed}
	resolverRetries := &deadletter.Retries{Loop: s.deadletters, Now: s.clock.Now, Log: s.log,
		Done: deadletter.ResolverDone, Failed: deadletter.ResolverFailed}
	worker := &sqsbatch.Batch{Each: s.worker.Handle, Report: workerRetries, Log: s.log}
	// A busy resolve job comes back when its key can next be taken (sqsbatch.RetryAfter), as
	// the payment-resolver function changes its message's visibility in AWS.
	resolver := &sqsbatch.Batch{Each: resolvequeue.Consumer{Service: s.payments}.Handle, Report: resolverRetries, Log: s.log,
		Visibility: s.queues[resolveQueue], VisibilityTimeout: resolveVisibility}
	consumers := []*queue.Consumer{
		{Queue: s.queues[webhookQueue], Handler: worker.Handle, Visibility: 30 * time.Second, Wait: 5 * time.Second,
			Concurrency: 4, SourceARN: arn(webhookQueue), Region: "local", Log: s.log},
		{Queue: s.queues[resolveQueue], Handler: resolver.Handle, Visibility: resolveVisibility, Wait: 5 * time.Second,
			Concurrency: 2, SourceARN: arn(resolveQueue), Region: "local", Log: s.log},
	}
	sink := &deadletter.Sink{Records: s.deadletters, Now: s.clock.Now}
	for _, dlq := range []string{webhookDLQ, resolveDLQ} {
		consumers = append(consumers, &queue.Consumer{Queue: s.queues[dlq], Handler: (&sqsbatch.Batch{Each: sink.Handle, Log: s.log}).Handle, Visibility: 30 * time.Second,
			Wait: 5 * time.Second, SourceARN: arn(dlq), Region: "local", Log: s.log})
	}
	for _, c := range consumers {
		s.goRun(func() { _ = c.Run(ctx) })
	}
	// Follow-on work committed before a kill -9 is still in the outbox: delivered now.
	s.goRun(func() { s.relay.Run(ctx, outboxEvery, nil) })
	if s.cfg.ReconcileEvery > 0 {
		s.goRun(func() {
			_ = recon.Every(ctx, s.cfg.ReconcileEvery, s.clock, func(ctx context.Context) { s.scheduledPass(ctx) })
		})
	}
	// Executions a kill -9 interrupted continue at the step they stopped.
	if n, err := s.runner.Resume(ctx); err != nil {
		s.log.Error("resume recoveries", "error", err)
	} else if n > 0 {
		s.log.Info("resumed recoveries", "executions", n)
	}
}

// scheduledPass is what the local scheduler runs every ReconcileEvery: the provider's event log
// from the backfill checkpoint first, then reconciliation of the scheduled window, so
// reconciliation compares what the backfill could not settle.
func (s *Stack) scheduledPass(ctx context.Context) (backfill.Report, recon.Report) {
	bf, err := s.backfill.Run(ctx, backfill.Request{})
	if err != nil {
		s.log.Error("scheduled backfill failed", "error", err)
	} else {
		s.log.Info("backfill", "listed", bf.Listed, "applied", len(bf.Applied))
	}
	rep, err := s.reconcileScheduled(ctx) // a failed run becomes a dead-letter record
	if err != nil {
		s.log.Error("scheduled reconciliation failed", "error", err)
	} else {
		s.log.Info("reconciliation", "run_id", rep.RunID, "differences", len(rep.Differences))
	}
	return bf, rep
}

// outboxEvery is how often the local relay drains the outbox.
const outboxEvery = 100 * time.Millisecond

// relayLanes is how many messages the local relay delivers at once (outbox.Relay.Lanes). One
// lane delivered 350-480 messages a second, a new payment makes two, and so the outbox fell
// behind any rate above about 200 payments a second (docs/performance.md).
const relayLanes = 16

// server is the API's HTTP server with the configured timeouts: no request, however slowly
// its client sends it, keeps a connection longer than ReadTimeout to arrive.
func (s *Stack) server(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: min(10*time.Second, s.cfg.ReadTimeout), ReadTimeout: s.cfg.ReadTimeout,
		WriteTimeout: s.cfg.WriteTimeout, IdleTimeout: s.cfg.IdleTimeout}
}

// operator checks the operator token on the stack's own routes (/ops/_faults, /ops/backfill,
// /events) as opsapi does on its own: a source with too many failures is refused with 429,
// and a wrong token counts as a failure. It answers the request and reports false when the
// caller may not go on.
func (s *Stack) operator(w http.ResponseWriter, r *http.Request) bool {
	if s.failures.Refuse(w, r) {
		return false
	}
	want := "Bearer " + s.cfg.OperatorToken
	if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte(want)) != 1 {
		if r.Header.Get("Authorization") != "" {
			s.failures.Failed(r)
		}
		problem.Error(w, http.StatusUnauthorized, "This route needs the operator token.")
		return false
	}
	return true
}

// withDeadline gives every request the deadline API Gateway would.
func withDeadline(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

func arn(q string) string { return "arn:aws:sqs:local:000000000000:" + q }

func (s *Stack) goRun(f func()) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
}

// APIURL and SimURL are where the stack listens.
func (s *Stack) APIURL() string { return "http://" + s.apiLn.Addr().String() }
func (s *Stack) SimURL() string { return "http://" + s.simLn.Addr().String() }

// Config returns the effective configuration.
func (s *Stack) Config() Config { return s.cfg }

// freshAttempts reads the attempt log once the API exchanges queued before the read are stored.
// An exchange is queued before its answer leaves and stored just behind it (s.exchanges), so a
// caller who was answered, or an operator who saw the payment, finds the exchange on the next
// lookup: the read waits for at most one round instead of missing it.
type freshAttempts struct {
	*attempts.Log
	exchanges *attempts.Background
}

func (f freshAttempts) Lookup(ctx context.Context, by attempts.By, value, cursor string) (attempts.Page, error) {
	if err := f.exchanges.Flush(ctx); err != nil {
		return attempts.Page{}, err
	}
	return f.Log.Lookup(ctx, by, value, cursor)
}

func (f freshAttempts) LookupKey(ctx context.Context, scope, key, cursor string) (attempts.Page, error) {
	if err := f.exchanges.Flush(ctx); err != nil {
		return attempts.Page{}, err
	}
	return f.Log.LookupKey(ctx, scope, key, cursor)
}

// FileStats is what one data file's commits have cost since the stack started.
type FileStats struct {
	boltgroup.Stats
	PagesWritten int64         // pages written by those commits (bbolt's TxStats.Write)
	Writing      time.Duration // time in their writes and fsyncs (TxStats.WriteTime)
	// Keys is what the store's writes put or deleted, per table (boltstore.Store.Writes);
	// nil for the simulator's file.
	Keys map[string]int64 `json:",omitempty"`
}

// Files reports the commits of the stack's data files, "twice.db" and "providersim.db": with
// the time elapsed, how busy each file's committer is and how many pages each commit writes,
// which is what bounds the stack when the disk's flushes are the limit, and for twice.db the
// keys each table's writes touched, which is where those pages come from (docs/performance.md).
func (s *Stack) Files() map[string]FileStats {
	file := func(c boltgroup.Stats, db *bolt.DB) FileStats {
		tx := db.Stats().TxStats
		return FileStats{Stats: c, PagesWritten: tx.GetWrite(), Writing: tx.GetWriteTime()}
	}
	own := file(s.store.Committer().Stats(), s.store.DB())
	own.Keys = s.store.Writes()
	return map[string]FileStats{
		"twice.db":       own,
		"providersim.db": file(s.sim.CommitStats(), s.sim.DB()),
	}
}

// Close stops serving, lets in-flight work finish, and closes the data files.
func (s *Stack) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if s.apiSrv != nil {
		s.apiSrv.Shutdown(ctx)
		s.simSrv.Shutdown(ctx)
	} else {
		if s.apiLn != nil {
			s.apiLn.Close()
		}
		if s.simLn != nil {
			s.simLn.Close()
		}
	}
	if s.exchanges != nil {
		s.exchanges.Close() // no request is left to queue one
	}
	if s.cancel != nil {
		s.cancel()
	}
	var errs []error
	if s.runner != nil {
		errs = append(errs, s.runner.Close())
	}
	if s.sim != nil {
		errs = append(errs, s.sim.Close())
	}
	s.wg.Wait()
	// The queues close after their consumers: a consumer deletes the batch it handled even
	// once cancelled, and a delete refused by a closed queue would redeliver work already done.
	if s.broker != nil {
		errs = append(errs, s.broker.Close())
	}
	if s.store != nil {
		errs = append(errs, s.store.Close())
	}
	return errors.Join(errs...)
}

// reconcileScheduled runs the scheduled reconciliation over its window; a run that fails
// becomes a dead-letter record whose Retry runs the same window again (as the AWS schedule's
// failures reach the dead-letter table through reconcile-dlq).
func (s *Stack) reconcileScheduled(ctx context.Context) (recon.Report, error) {
	w := s.recon.DefaultWindow()
	input, err := json.Marshal(recon.Event{From: w.From.UTC().Format(time.RFC3339), To: w.To.UTC().Format(time.RFC3339)})
	if err != nil {
		return recon.Report{}, err
	}
	rep, err := s.recon.Handle(ctx, input)
	if err != nil {
		if _, _, oerr := s.deadletters.Open(context.WithoutCancel(ctx), deadletter.ReconRunFailed(input, s.clock.Now())); oerr != nil {
			return rep, errors.Join(err, oerr)
		}
	}
	return rep, err
}

// steerer is the relay's: it resumes parked recoveries on the local runner when their timers
// fire or a steering signal brings them forward, as recoveryfn.Steerer does on AWS.
func (s *Stack) steerer() *recovery.Steerer {
	return &recovery.Steerer{Store: s.store, Starter: s.resumer, Now: s.clock.Now}
}

// operatorSteerer is the operator API's: it commits each signal with the wake the relay
// delivers, as operator-api does in AWS.
func (s *Stack) operatorSteerer() *recovery.Steerer {
	return &recovery.Steerer{Store: s.store, Now: s.clock.Now}
}
