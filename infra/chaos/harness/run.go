package harness

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runtwice/twice/infra/inprocess"
	"github.com/runtwice/twice/shared/payments"
)

// Config is one chaos run. NewConfig and ShortConfig give the defaults.
type Config struct {
	Payments    int
	Seed        uint64
	Kills       int
	Concurrency int           // logical payments in flight
	Duration    time.Duration // hard bound of the whole run; the report comes even if incomplete
	Settle      time.Duration // bound of the wait for every payment to reach a final status
	MaxDelay    time.Duration // longest wait between a payment's two waves of sends

	// The stack's flags: short, so orphaned locks and background resolves settle quickly.
	ProviderTimeout time.Duration
	RequestTimeout  time.Duration
	ResolveDelay    time.Duration
	// TimeFactor runs recovery's clock faster, so declined payments go through their retries,
	// and their dead letters, within the run (and under its kills).
	TimeFactor float64
	// Jump moves the stack's clock this far forward while it is down at the last kill, as if
	// it had been down that long: past the provider's 24 h key horizon, payments left pending
	// must be found at the provider, never created again. 0: no jump.
	Jump time.Duration

	// DropRate is the share of webhook deliveries the simulator loses (seeded); the backfill
	// passes of the settle phase must make every local payment what the provider says. Every
	// delivery about the plan's unheard payments is dropped whatever the rate.
	DropRate float64
	// BackfillMaxEvents bounds each backfill pass of the stack (0: its default, 50,000), so
	// the backlog of dropped deliveries is larger than one pass and a walk takes several.
	BackfillMaxEvents int
	// CaptureWindow is the stack's -capture-window: an authorization the plan leaves alone
	// must be surfaced (a reconciliation record naming it) by the end of the run.
	CaptureWindow time.Duration
	// Throttle is the stack's -throttle: the share of its calls to the store, queues, runner,
	// event feed and provider refused as throttled (0: none). The invariants hold all the same.
	Throttle float64

	FaultEvery  time.Duration // mean interval between armed simulator faults
	ReplayEvery time.Duration // mean interval between webhook replays

	Bin      string    // a built infra/local; built into a temporary directory when empty
	DataDir  string    // kept after the run when set; a temporary directory otherwise
	Progress io.Writer // the one-line progress bar; nil for none
	Log      *slog.Logger
}

// NewConfig is the default run: 1,000 payments, 3 kills, 10 minutes at most.
func NewConfig(seed uint64) Config {
	return Config{Payments: 1000, Seed: seed, Kills: 3, Concurrency: 32, Duration: 10 * time.Minute,
		Settle: 90 * time.Second, MaxDelay: 3 * time.Second,
		ProviderTimeout: time.Second, RequestTimeout: 3 * time.Second, ResolveDelay: 200 * time.Millisecond,
		TimeFactor: 200_000, Jump: 25 * time.Hour, DropRate: 0.2, BackfillMaxEvents: 50, CaptureWindow: 2 * time.Second,
		FaultEvery: 300 * time.Millisecond, ReplayEvery: 200 * time.Millisecond}
}

// throttledRequestTimeout is the stack's request deadline in a throttled run.
const throttledRequestTimeout = 29 * time.Second

// ShortConfig is the quick run of the test command: 60 payments, one kill, about a minute at
// most.
func ShortConfig(seed uint64) Config {
	c := NewConfig(seed)
	c.Payments, c.Kills, c.Concurrency = 60, 1, 30
	c.FaultEvery, c.ReplayEvery = 500*time.Millisecond, 300*time.Millisecond // fewer requests per second than the long run
	c.Duration, c.Settle, c.MaxDelay = 75*time.Second, 30*time.Second, 1500*time.Millisecond
	c.BackfillMaxEvents = 10 // its smaller backlog still takes several passes
	return c
}

// Report is the outcome of a run: the table the command prints.
type Report struct {
	Seed     uint64 `json:"seed"`
	Payments int    `json:"logical_payments"`
	// Throttle is the share of the stack's calls refused as throttled (Config.Throttle).
	Throttle float64 `json:"throttle,omitempty"`
	// ClockStart is the stack's clock start, drawn from the seed; ClockJump, how far the clock
	// moved forward while the stack was down at the last kill (0: no jump was made).
	ClockStart time.Time     `json:"clock_start"`
	ClockJump  time.Duration `json:"clock_jump_ns"`
	// Recoverable counts the payments on cards programmed to decline a few times and then
	// succeed; Recovered, those of them that ended succeeded.
	Recoverable       int   `json:"recoverable_payments"`
	Recovered         int   `json:"recoverable_recovered"`
	Requests          int64 `json:"requests_sent"`
	WebhookDeliveries int64 `json:"webhook_deliveries"`
	ProviderIntents   int   `json:"provider_payment_intents"`
	// DroppedDeliveries counts the events the simulator lost on purpose; BackfillApplied, the
	// lost ones the backfill passes applied (the rest the stack had recorded itself).
	DroppedDeliveries int `json:"dropped_deliveries"`
	BackfillApplied   int `json:"backfill_applied"`
	// BackfillPasses counts the backfill passes the run made; BackfillLongestWalk, the most
	// passes one walk of the log took (more than 1: the backlog was larger than one pass of
	// BackfillMaxEvents, 0 for the stack's default).
	BackfillPasses      int `json:"backfill_passes"`
	BackfillLongestWalk int `json:"backfill_longest_walk"`
	BackfillMaxEvents   int `json:"backfill_max_events"`
	// Unheard counts the plan's unheard payments (Plan.Unheard); UnheardSettled, their charges
	// the run settled at the provider, which only the event log told the stack about.
	Unheard        int `json:"unheard_payments"`
	UnheardSettled int `json:"unheard_settled_at_provider"`
	// Manual counts the plan's manual-capture payments; FlowsSkipped, the payments whose
	// capture or refunds never ran (the payment did not reach the status they need in time).
	Manual       int `json:"manual_capture_payments"`
	FlowsSkipped int `json:"flows_skipped"`
	// NeverAtProvider counts payments canceled with no PaymentIntent (pending past the key
	// horizon and never at the provider).
	NeverAtProvider int `json:"canceled_never_at_provider"`
	Findings
	// Flows are the captures, cancels and refunds and their invariants.
	Flows FlowFindings `json:"flows"`
	// DeadLetters counts dead-letter records by source/class; nil when the stack has no
	// operator route for them.
	DeadLetters map[string]int `json:"dead_letters_by_reason"`
	// Reconciliation counts the differences a reconciliation over the run's window found, by
	// class; nil when the stack has no such route.
	Reconciliation map[string]int `json:"reconciliation_differences"`
	// Recoveries is nil when the recovery executions could not be read.
	Recoveries *Recoveries `json:"recoveries"`
	// Answers counts the answers the clients got, by status ("conn" for a dropped connection).
	Answers        map[string]int `json:"answers"`
	FaultsInjected int64          `json:"faults_injected"`
	Kills          int            `json:"kills"`
	Faults         int            `json:"faults_armed"`
	Replays        int            `json:"webhook_replays"`
	Statuses       map[string]int `json:"final_statuses"`
	Seconds        float64        `json:"seconds"`
	// StartSeconds, DriveSeconds and SettleSeconds split the time: the build and first start,
	// the payments with chaos, then the late retry of every key and the wait for every payment
	// to settle. The rest is the check and the final stop.
	StartSeconds  float64 `json:"start_seconds"`
	DriveSeconds  float64 `json:"drive_seconds"`
	SettleSeconds float64 `json:"settle_seconds"`
	// Incomplete says why the run ended before every payment settled ("" when it did not).
	Incomplete string `json:"incomplete,omitempty"`
}

// Broken lists every invariant that failed: the payments' and the flows'.
func (r Report) Broken() []string { return append(r.Findings.Broken(), r.Flows.Broken()...) }

// Recoveries are the recovery executions: started, and how they stand.
type Recoveries struct {
	Started   int `json:"started"`
	Succeeded int `json:"succeeded"` // ended with a charge
	Stopped   int `json:"stopped"`   // ended without one, in a dead letter
	Running   int `json:"running"`
	Failed    int `json:"failed"`
	// Unnamed counts the ended ones that give no reason: a stop without a plan reason,
	// explanation or dead-letter record, a failure without an error name. Must be 0.
	Unnamed int `json:"ended_without_a_named_reason"`
}

// run holds the state of one run.
type run struct {
	cfg    Config
	plan   Plan
	proc   *process
	sim    *simClient
	client *client
	log    *slog.Logger

	ledgers []*ledger
	flows   []*flowLedgers
	// flowsSkipped counts payments whose capture or refunds never ran.
	flowsSkipped atomic.Int64
	requests     atomic.Int64
	started      atomic.Int64
	kills        atomic.Int64
	faults       atomic.Int64
	replays      atomic.Int64
	settled      atomic.Int64
	jumped       atomic.Bool
	// backfilled counts the events the settle phase's backfill passes applied; backfillPasses
	// the passes, backfillWalk the most passes of one walk.
	backfilled     atomic.Int64
	backfillPasses atomic.Int64
	backfillWalk   atomic.Int64
	// unheardSettled counts the unheard payments' charges settled at the provider.
	unheardSettled atomic.Int64

	mu         sync.Mutex // one kill and restart at a time; guards deliveries
	deliveries int64      // deliveries_sent of the processes killed so far
	injected   int64      // faults_injected of the processes killed so far
	restartErr error
}

// Run drives the local stack through the plan of cfg.Seed and checks the invariants. The error
// is for a run that could not be made (build, start); broken invariants are in the report.
func Run(ctx context.Context, cfg Config) (Report, error) {
	begin := time.Now()
	if cfg.Throttle > 0 {
		// A request must outlast the retries' reserve (lambdaenv.RetryReserve) for a throttled
		// call in it to be retried at all: the stack's default, API Gateway's 29 s, as in AWS.
		// A reconciliation run (POST /ops/reconcile, the reconciler function locally) needs
		// the time too.
		cfg.RequestTimeout = max(cfg.RequestTimeout, throttledRequestTimeout)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tmp, err := os.MkdirTemp("", "twice-chaos")
	if err != nil {
		return Report{}, err
	}
	defer os.RemoveAll(tmp)
	if cfg.Bin == "" {
		if cfg.Bin, err = Build(ctx, tmp); err != nil {
			return Report{}, err
		}
	}
	data := cfg.DataDir
	if data == "" {
		data = filepath.Join(tmp, "data")
	}
	plan := NewPlan(cfg.Seed, cfg.Payments, cfg.Kills, cfg.MaxDelay)
	proc, err := newProcess(cfg.Bin, data, []string{"-provider-timeout", cfg.ProviderTimeout.String(),
		"-request-timeout", cfg.RequestTimeout.String(), "-resolve-delay", cfg.ResolveDelay.String(),
		"-time-factor", fmt.Sprint(cfg.TimeFactor), "-clock-start", plan.ClockStart.Format(time.RFC3339),
		"-backfill-max-events", fmt.Sprint(cfg.BackfillMaxEvents), "-capture-window", cfg.CaptureWindow.String(),
		"-throttle", fmt.Sprint(cfg.Throttle)})
	if err != nil {
		return Report{}, err
	}
	if err := proc.start(ctx, 30*time.Second); err != nil {
		proc.kill()
		return Report{}, err
	}
	defer proc.stop()
	// The start is kept with the data from here on; a restart after a clock jump must not name
	// the old one (the stack refuses a start other than its timeline's).
	proc.args = slices.Clone(proc.args)
	if i := slices.Index(proc.args, "-clock-start"); i >= 0 {
		proc.args = slices.Delete(proc.args, i, i+2)
	}

	transport := &http.Transport{MaxIdleConnsPerHost: 4 * cfg.Concurrency}
	r := &run{cfg: cfg, plan: plan, proc: proc, log: log,
		sim: &simClient{http: &http.Client{Transport: transport, Timeout: 10 * time.Second}, base: "http://" + proc.sim,
			apiKey: inprocess.DefaultStripeAPIKey}}
	r.client = &client{http: &http.Client{Transport: transport, Timeout: cfg.RequestTimeout + 2*time.Second},
		base: func() string { return "http://" + proc.api }, requests: &r.requests, answers: &counts{}, attempts: 8, budget: 60 * time.Second}
	rep := Report{Seed: cfg.Seed, Payments: cfg.Payments, ClockStart: plan.ClockStart, Recoverable: plan.Recoverable(),
		Unheard: plan.Unheard(), BackfillMaxEvents: cfg.BackfillMaxEvents, Manual: plan.Manual(), Throttle: cfg.Throttle}
	r.ledgers = make([]*ledger, cfg.Payments)
	r.flows = make([]*flowLedgers, cfg.Payments)
	for i := range r.ledgers {
		r.ledgers[i] = &ledger{}
		r.flows[i] = &flowLedgers{capture: &opLedger{}}
		for range plan.Payments[i].Refunds {
			r.flows[i].refunds = append(r.flows[i].refunds, &opLedger{})
		}
	}
	if err := r.programCards(ctx); err != nil {
		return rep, err
	}
	if r.backfills() {
		var unheard []string
		if plan.Unheard() > 0 {
			unheard = []string{UnheardCustomer(plan.Seed)}
		}
		if err := r.sim.dropDeliveries(ctx, cfg.DropRate, plan.Seed, unheard); err != nil {
			return rep, err
		}
	}

	driving := time.Now() // after the build and the first start
	rep.StartSeconds = driving.Sub(begin).Seconds()
	stopBar := r.progress(driving)
	settleBy := begin.Add(cfg.Duration - min(cfg.Settle, cfg.Duration/3)) // keep time to settle and check
	driveCtx, stopDrive := context.WithDeadline(ctx, settleBy)
	err = r.drive(driveCtx)
	stopDrive()
	if err != nil {
		stopBar()
		return rep, err
	}
	if driveCtx.Err() != nil && ctx.Err() == nil && r.started.Load() < int64(cfg.Payments) {
		rep.Incomplete = fmt.Sprintf("the duration bound stopped the drive after %d of %d payments", r.started.Load(), cfg.Payments)
	}
	rep.DriveSeconds = time.Since(driving).Seconds()
	_ = r.sim.clearFaults(ctx)
	obs := r.settle(ctx)
	// Follow-on work in its backoff when the payments settle is late, not lost: let it drain
	// (the relay's backoff is capped at 10 s locally) before the check reads the outbox.
	drainCtx, cancelDrain := context.WithTimeout(ctx, 30*time.Second)
	r.ops().drainOutbox(drainCtx)
	cancelDrain()
	// Every capture, cancel and refund key once more, then wait until no refund of ours is
	// pending and every refund that fails later has failed at the provider.
	r.lateFlowRetry(ctx)
	r.settleFlows(ctx)
	if r.backfills() {
		// One more walk after everything settled, then read again: the status check below is
		// "local state equals the provider's after backfill".
		r.settleUnheard(ctx)
		r.backfill(ctx)
		drainCtx, cancelDrain := context.WithTimeout(ctx, 30*time.Second)
		r.ops().drainOutbox(drainCtx)
		cancelDrain()
		r.reread(ctx, obs)
	}
	r.quiesce(ctx)
	rep.SettleSeconds = time.Since(driving).Seconds() - rep.DriveSeconds
	stopBar()

	checkFor := 30 * time.Second
	if cfg.Throttle > 0 {
		checkFor = 3 * time.Minute // the reads retry their throttled calls, and a reconciliation may be tried again
	}
	checkCtx, cancelCheck := context.WithTimeout(context.Background(), checkFor) // the check runs even past the bound
	defer cancelCheck()
	intents, err := r.sim.intents(checkCtx)
	if err != nil {
		return rep, fmt.Errorf("chaos: read the provider's records: %w", err)
	}
	if rep.Incomplete == "" && ctx.Err() != nil {
		rep.Incomplete = "the duration bound ended the run before every payment settled"
	}
	refunds, err := r.sim.refunds(checkCtx)
	if err != nil {
		return rep, fmt.Errorf("chaos: read the provider's refunds: %w", err)
	}
	refundedOf := map[string]int64{}
	for _, rf := range refunds {
		if rf.Status == "pending" || rf.Status == "succeeded" {
			refundedOf[rf.PaymentIntent] += rf.Amount
		}
	}
	for i := range intents {
		intents[i].Refunded = refundedOf[intents[i].ID]
	}
	rep.Findings = Check(obs, intents, rep.Incomplete == "")
	flowObs := r.flowObservations(checkCtx)
	rep.UnheardSettled = int(r.unheardSettled.Load())
	rep.BackfillApplied = int(r.backfilled.Load())
	rep.BackfillPasses, rep.BackfillLongestWalk = int(r.backfillPasses.Load()), int(r.backfillWalk.Load())
	charged := map[string]bool{}
	for _, in := range intents {
		charged[in.PaymentID] = true
	}
	reached := 0 // unheard payments the provider charged (the rest never got there)
	for _, o := range obs {
		if o.Unheard && charged[o.ID] {
			reached++
		}
	}
	if reached > 0 && rep.BackfillApplied == 0 {
		// The provider holds charges whose outcome the stack could learn from the event log
		// alone, and the backfill applied nothing: either they were never settled there or
		// the backfill missed them; the claim went unshown either way.
		rep.BackfillIdle = 1
		rep.example("backfill idle: %d unheard payments at the provider, %d settled there, 0 events applied by backfill", reached, rep.UnheardSettled)
	}
	for _, o := range obs {
		switch {
		case !o.Recoverable:
		case o.Status == "succeeded":
			rep.Recovered++
		case o.Status == "canceled" && !charged[o.ID]:
			rep.Recoverable-- // never reached the provider (pending past the key horizon): nothing to recover
		}
	}
	for _, o := range obs {
		if o.Status == "canceled" && !charged[o.ID] {
			rep.NeverAtProvider++
		}
	}
	rep.ProviderIntents = len(intents)
	if n, err := r.sim.dropped(checkCtx); err == nil {
		rep.DroppedDeliveries = n
	}
	if st, err := r.sim.stats(checkCtx); err == nil {
		r.mu.Lock()
		rep.WebhookDeliveries = r.deliveries + st.DeliveriesSent
		rep.FaultsInjected = r.injected + st.FaultsInjected
		r.mu.Unlock()
	}
	ops := r.ops()
	// The window is the run's, on the stack's clock, ending now: a reconciliation refuses one
	// that ends in the future.
	if now, err := stackNow(data); err == nil {
		rep.Reconciliation = ops.reconcile(checkCtx, plan.ClockStart.Add(-time.Minute), now.Add(-time.Second))
	} else {
		log.Warn("stack clock unreadable; no reconciliation", "error", err)
	}
	// The reconciliation's records go through the outbox.
	drainCtx, cancelDrain = context.WithTimeout(checkCtx, 10*time.Second)
	ops.drainOutbox(drainCtx)
	cancelDrain()
	rep.DeadLetters = ops.deadLetters(checkCtx)
	rep.Flows = CheckFlows(flowObs, intents, refunds, ops.surfacedPayments(checkCtx), &rep.Findings)
	rep.FlowsSkipped = int(r.flowsSkipped.Load())
	if r.jumped.Load() {
		rep.ClockJump = cfg.Jump
	}
	rep.Answers = r.client.answers.snapshot()
	rep.Requests, rep.Kills = r.requests.Load(), int(r.kills.Load())
	rep.Faults, rep.Replays = int(r.faults.Load()), int(r.replays.Load())
	rep.Statuses = map[string]int{}
	for _, o := range obs {
		s := o.Status
		if !o.Found {
			s = "unknown"
		}
		rep.Statuses[s]++
	}
	proc.stop()
	if rec, err := readRecoveries(checkCtx, data); err == nil {
		rep.Recoveries = rec
		rep.UnnamedStops = rec.Unnamed
	} else {
		log.Warn("recovery executions unreadable", "error", err)
	}
	if n, ex, err := readFollowOns(checkCtx, data, obs); err == nil && rep.Incomplete == "" {
		rep.FollowOnsLost, rep.Examples = n, append(rep.Examples, ex...)
	} else if err != nil {
		log.Warn("outbox unreadable", "error", err)
	}
	rep.Seconds = time.Since(begin).Seconds()
	return rep, nil
}

// drive runs every logical payment, the kills and the chaos schedule, and returns when every
// payment's two waves are done or ctx ends.
func (r *run) drive(ctx context.Context) error {
	chaosCtx, stopChaos := context.WithCancel(ctx)
	var bg sync.WaitGroup
	bg.Go(func() { r.chaos(chaosCtx) })
	defer func() { stopChaos(); bg.Wait() }()

	sem := make(chan struct{}, r.cfg.Concurrency)
	var wg sync.WaitGroup
	next := 0
	for _, p := range r.plan.Payments {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		n := int(r.started.Add(1))
		if next < len(r.plan.KillAt) && n >= r.plan.KillAt[next] {
			next++
			// The kill runs beside the payments in flight, so it lands among their requests.
			wg.Go(func() { r.killAndRestart(ctx) })
		}
		wg.Go(func() {
			defer func() { <-sem }()
			r.pay(ctx, p)
		})
	}
	wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.restartErr
}

// pay sends one logical payment: a wave of concurrent duplicates, then later ones.
func (r *run) pay(ctx context.Context, p Payment) {
	l := r.ledgers[p.Index]
	wave := func(n, salt int) {
		var wg sync.WaitGroup
		for i := range n {
			rng := rand.New(rand.NewPCG(p.Client, uint64(salt*8+i)))
			wg.Go(func() { r.client.send(ctx, p, rng, l) })
		}
		wg.Wait()
	}
	wave(p.First, 1)
	r.markSettled(l)
	select {
	case <-ctx.Done():
		return
	case <-time.After(p.Delay):
	}
	wave(p.Later, 2)
	r.flow(ctx, p)
}

func (r *run) markSettled(l *ledger) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.settled && !l.counted {
		l.counted = true
		r.settled.Add(1)
	}
}

// killAndRestart kills the stack with SIGKILL and starts it again on the same data and ports.
func (r *run) killAndRestart(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	statsCtx, cancel := context.WithTimeout(ctx, time.Second)
	if st, err := r.sim.stats(statsCtx); err == nil {
		r.deliveries += st.DeliveriesSent // the counters restart with the process
		r.injected += st.FaultsInjected
	}
	cancel()
	r.proc.kill()
	n := r.kills.Add(1)
	r.log.Info("killed the stack", "kill", n, "started", r.started.Load())
	if r.cfg.Jump > 0 && int(n) == len(r.plan.KillAt) {
		if err := jumpClock(r.proc.data, r.cfg.Jump); err != nil && r.restartErr == nil {
			r.restartErr = err
		}
		r.jumped.Store(true)
	}
	if err := r.proc.start(context.WithoutCancel(ctx), 30*time.Second); err != nil && r.restartErr == nil {
		r.restartErr = fmt.Errorf("chaos: restart after kill %d: %w", r.kills.Load(), err)
	}
}

// faultKinds are the simulator faults the schedule arms.
var faultKinds = []string{"timeout_after_effect", "http_500", "http_429", "latency"}

// chaos arms simulator faults and replays webhooks at random moments until ctx ends.
func (r *run) chaos(ctx context.Context) {
	rng := rand.New(rand.NewPCG(r.plan.Seed, 0x6661756c74)) // "fault"
	opsRng := rand.New(rand.NewPCG(r.plan.Seed, 0x6f7073))  // "ops"
	// Refund faults draw from their own generator, so a seed's other faults stay what they were.
	refundRng := rand.New(rand.NewPCG(r.plan.Seed, 0x726566756e64)) // "refund"
	nextFault := time.Now()
	nextReplay := time.Now()
	for {
		now := time.Now()
		if !now.Before(nextFault) && opsRng.IntN(4) == 0 {
			// Now and then the stack's own StartExecution fails instead (its own generator, so a
			// seed's provider faults stay what they were).
			if r.ops().armStartFailures(ctx, 1+opsRng.IntN(5)) == nil {
				r.faults.Add(1)
			}
		}
		if !now.Before(nextFault) {
			f := fault{PathPrefix: "/v1/payment_intents", Fault: faultKinds[rng.IntN(len(faultKinds))], Count: 1 + rng.IntN(3)}
			switch f.Fault {
			case "http_429":
				f.RetryAfterS = 1
			case "latency":
				f.LatencyMS = 100 + rng.IntN(1400) // sometimes past the provider timeout
			}
			if r.sim.arm(ctx, f) == nil {
				r.faults.Add(1)
			}
			if r.plan.RefundKeys() > 0 && refundRng.IntN(3) == 0 {
				rf := fault{PathPrefix: "/v1/refunds", Method: http.MethodPost, Fault: faultKinds[refundRng.IntN(len(faultKinds))], Count: 1}
				switch rf.Fault {
				case "http_429":
					rf.RetryAfterS = 1
				case "latency":
					rf.LatencyMS = 100 + refundRng.IntN(1400)
				}
				if r.sim.arm(ctx, rf) == nil {
					r.faults.Add(1)
				}
			}
			nextFault = now.Add(time.Duration(rng.Int64N(2*int64(r.cfg.FaultEvery)) + 1))
		}
		if !now.Before(nextReplay) {
			if ids, err := r.sim.recentEvents(ctx, 200); err == nil && len(ids) > 0 {
				rp := replay{EventID: ids[rng.IntN(len(ids))], Times: 2 + rng.IntN(2), Shuffle: rng.IntN(2) == 0,
					DelayMS: rng.Int64N(500)}
				if r.sim.replay(ctx, rp) == nil {
					r.replays.Add(1)
				}
			}
			nextReplay = now.Add(time.Duration(rng.Int64N(2*int64(r.cfg.ReplayEvery)) + 1))
		}
		wait := min(time.Until(nextFault), time.Until(nextReplay))
		select {
		case <-ctx.Done():
			return
		case <-time.After(max(wait, time.Millisecond)):
		}
	}
}

// settle waits, bounded, for every accepted payment to reach a final status, sends every key
// once more as a late client retry would, and reads the final state of every payment.
func (r *run) settle(ctx context.Context) []Observation {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Settle)
	defer cancel()
	ids := make([]string, len(r.plan.Payments))
	for i, p := range r.plan.Payments {
		ids[i] = payments.PaymentID("local", p.Key)
	}
	// The late retry: every key once more, so a payment whose every try failed is sent again,
	// and every final answer is compared with the first.
	r.parallel(ctx, func(i int) {
		rng := rand.New(rand.NewPCG(r.plan.Payments[i].Client, 99))
		r.client.send(ctx, r.plan.Payments[i], rng, r.ledgers[i])
		r.markSettled(r.ledgers[i])
	})
	obs := make([]Observation, len(r.plan.Payments))
	for i, p := range r.plan.Payments {
		obs[i] = Observation{Key: p.Key, ID: ids[i], Recoverable: p.Recover != nil, Unheard: p.SettleAs != ""}
	}
	read := make([]bool, len(obs)) // the stack answered a GET (200 or 404)
	readAll := func(ctx context.Context) {
		r.parallel(ctx, func(i int) {
			if o := &obs[i]; read[i] && o.Found && !stillMoving(o.Status) && !awaitingRecovery(*o) {
				return
			}
			status, found, err := r.client.get(ctx, ids[i])
			if err == nil {
				read[i], obs[i].Found, obs[i].Status = true, found, status
			}
		})
	}
	var lastBackfill time.Time // the first walk comes at once
	for ctx.Err() == nil {
		open := 0
		readAll(ctx)
		for i := range obs {
			if l := r.ledgers[i]; obs[i].Found && (stillMoving(obs[i].Status) || awaitingRecovery(obs[i])) || (!obs[i].Found && l.isAccepted()) {
				open++
			}
		}
		if open == 0 {
			break
		}
		// A payment whose webhook was dropped waits for the provider's event log, as the
		// scheduled backfill would bring it: a walk every couple of seconds while some wait.
		// The unheard payments' charges are settled at the provider first, so only that walk
		// can bring their outcome.
		if r.backfills() && time.Since(lastBackfill) > 2*time.Second {
			r.settleUnheard(ctx)
			r.backfill(ctx)
			lastBackfill = time.Now()
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
	if slices.Contains(read, false) {
		// One last read past the bound: a payment is judged by what the stack answers, never
		// by a read the bound cut off.
		last, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		readAll(last)
	}
	for i, l := range r.ledgers {
		l.mu.Lock()
		obs[i].Accepted, obs[i].Finals = l.accepted, append([]Answer(nil), l.finals...)
		l.mu.Unlock()
	}
	return obs
}

// quiesce brings the provider and the stack to rest before the check reads the stack's data:
// the simulator sends every delivery it still holds (a retry in its backoff, a replay), and
// the stack's queues and outbox drain, until a round has nothing left to send. Without it a
// delivery arriving after the last drain commits a change message the check then counts as
// never delivered.
func (r *run) quiesce(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		sent, err := r.sim.flush(ctx)
		r.ops().drainOutbox(ctx)
		if err == nil && sent == 0 {
			return
		}
	}
}

// reread reads every found payment's status again (after a backfill moved some).
func (r *run) reread(ctx context.Context, obs []Observation) {
	r.parallel(ctx, func(i int) {
		if !obs[i].Found {
			return
		}
		if status, found, err := r.client.get(ctx, obs[i].ID); err == nil && found {
			obs[i].Status = status
		}
	})
}

func stillMoving(status string) bool {
	return status == "pending" || status == "processing" || status == ""
}

// awaitingRecovery: a recoverable payment still declined has its recovery to come.
func awaitingRecovery(o Observation) bool { return o.Recoverable && o.Status == "declined" }

// backfills says the run's settle phase walks the provider's event log: some deliveries are
// dropped.
func (r *run) backfills() bool { return r.cfg.DropRate > 0 || r.plan.Unheard() > 0 }

// programCards makes each recoverable payment's card decline as its plan says, then succeed,
// and each unheard payment's card leave its charge processing.
func (r *run) programCards(ctx context.Context) error {
	for _, p := range r.plan.Payments {
		var card map[string]any
		switch {
		case p.Recover != nil:
			card = map[string]any{"payment_method": p.Card, "brand": "visa", "decline_code": p.Recover.Code, "times": p.Recover.Times}
		case p.SettleAs != "":
			card = map[string]any{"payment_method": p.Card, "brand": "visa", "processing": true}
		default:
			continue
		}
		if err := r.sim.do(ctx, http.MethodPost, "/_sim/cards", card, nil); err != nil {
			return fmt.Errorf("chaos: program card %s: %w", p.Card, err)
		}
	}
	return nil
}

// parallel runs f for every payment index on cfg.Concurrency goroutines.
func (r *run) parallel(ctx context.Context, f func(i int)) {
	idx := make(chan int)
	var wg sync.WaitGroup
	for range r.cfg.Concurrency {
		wg.Go(func() {
			for i := range idx {
				f(i)
			}
		})
	}
	for i := range r.plan.Payments {
		if ctx.Err() != nil {
			break
		}
		idx <- i
	}
	close(idx)
	wg.Wait()
}

// progress draws the one-line bar until the returned stop is called.
func (r *run) progress(begin time.Time) (stop func()) {
	if r.cfg.Progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	draw := func() {
		n, total := int(r.settled.Load()), r.cfg.Payments
		const width = 30
		filled := n * width / max(total, 1)
		bar := make([]byte, width)
		for i := range bar {
			bar[i] = '.'
			if i < filled {
				bar[i] = '#'
			}
		}
		fmt.Fprintf(r.cfg.Progress, "\r[%s] %d/%d settled  %d requests  %d/%d kills  %d faults  %d replays  %5.1fs ",
			bar, n, total, r.requests.Load(), r.kills.Load(), r.cfg.Kills, r.faults.Load(), r.replays.Load(), time.Since(begin).Seconds())
	}
	wg.Go(func() {
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				draw()
				fmt.Fprintln(r.cfg.Progress)
				return
			case <-t.C:
				draw()
			}
		}
	})
	return func() { close(done); wg.Wait() }
}
