package recon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/store"
)

// Tables the reconciler writes.
const (
	// RunsTable holds one report per run, keyed by run id, indexed under "runs" by window end.
	RunsTable = "recon_runs"
	// DifferencesTable holds one record per difference key: the guard that opens each
	// difference once across overlapping runs.
	DifferencesTable = "recon_differences"
)

// Defaults of Config.
const (
	DefaultGrace     = 10 * time.Minute
	DefaultMargin    = 10 * time.Minute
	DefaultRetention = 35 * 24 * time.Hour
)

// Sink receives each new difference (the dead-letter table, source "reconciliation"). Open must
// be idempotent on d.Key: after a crash between Open and the reconciler's own bookkeeping, the
// next run opens the same difference again.
type Sink interface {
	Open(ctx context.Context, d Difference) error
}

// Healer applies a provider payment, or one provider refund, as the events that report them
// would (payments.Applier's Settle and SettleRefund: the one path every provider observation
// takes).
type Healer interface {
	Settle(ctx context.Context, p provider.Payment, eventID string) (payments.Effect, error)
	SettleRefund(ctx context.Context, r provider.Refund, eventID string) (payments.Effect, error)
}

// ErrConfig: a Reconciler lacks a required field.
var ErrConfig = errors.New("recon: incomplete config")

// Reconciler compares a window of our payments with the provider's. Build it as a literal;
// Store, Provider and Sink are required (Run fails with ErrConfig without them), the other
// fields' zero values take the defaults.
type Reconciler struct {
	Store    store.Store
	Provider provider.Provider
	Sink     Sink
	// Metrics receives the counts of each run (default: none).
	Metrics *Metrics
	// Log defaults to slog.Default() and Now to time.Now.
	Log *slog.Logger
	Now func() time.Time
	// Grace is how long a payment may stay in flight before a disagreement counts (default
	// DefaultGrace): webhooks arrive late, unknown outcomes take a while to resolve.
	Grace time.Duration
	// Margin widens the compared span on both sides of the window (default DefaultMargin), so
	// a payment created on one side of an edge finds its counterpart created on the other.
	Margin time.Duration
	// Retention is how long a difference record guards against reporting the difference again
	// (default DefaultRetention, longer than MaxWindow).
	Retention time.Duration
	// WindowHours and EndOffset shape the default window (defaults DefaultWindowHours,
	// DefaultEndOffset).
	WindowHours int
	EndOffset   time.Duration
	// Events, when set, widens a run to the changes in its window: every payment the provider's
	// events in the window name (a refund or dispute of an older payment) is compared too.
	Events provider.EventLister
	// Healer, when set, settles the differences a machine can (missing locally, the provider
	// ahead of us) by applying the provider's payment as its event would be applied; only the
	// others open dead-letter records.
	Healer Healer
	// Bounds are how long a payment may stay in each waiting status (zero: the defaults,
	// payments.DefaultCustomerWindow and DefaultCaptureWindow). A payment still waiting for
	// its customer past the customer window is canceled (expire), not reported.
	Bounds payments.Bounds
	// Readers is how many payments' refunds a run reads at once, its refund ledger and the
	// provider's list (default DefaultReaders).
	Readers int
}

// DefaultReaders is Reconciler.Readers' default: enough that a run's per-payment reads, each
// backing off when throttled, overlap instead of adding up, and few enough to stay a small
// burst against the provider's read limit (Stripe's test mode allows 25 requests a second).
const DefaultReaders = 4

func (r *Reconciler) readers() int {
	if r.Readers <= 0 {
		return DefaultReaders
	}
	return r.Readers
}

func (r *Reconciler) now() time.Time {
	if r.Now == nil {
		return time.Now()
	}
	return r.Now()
}

func (r *Reconciler) log() *slog.Logger {
	if r.Log == nil {
		return slog.Default()
	}
	return r.Log
}

func orDefault[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

func (r *Reconciler) grace() time.Duration     { return orDefault(r.Grace, DefaultGrace) }
func (r *Reconciler) margin() time.Duration    { return orDefault(r.Margin, DefaultMargin) }
func (r *Reconciler) retention() time.Duration { return orDefault(r.Retention, DefaultRetention) }
func (r *Reconciler) windowHours() int         { return orDefault(r.WindowHours, DefaultWindowHours) }
func (r *Reconciler) endOffset() time.Duration { return orDefault(r.EndOffset, DefaultEndOffset) }

// Report is what one run found. It is stored once per run id.
type Report struct {
	RunID      string    `json:"run_id"`
	Window     Window    `json:"window"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
	DurationMS int64     `json:"duration_ms"`
	// ComparedLocal and ComparedProvider count the payments compared on each side.
	ComparedLocal    int `json:"compared_local"`
	ComparedProvider int `json:"compared_provider"`
	// Found counts the differences of each class this run saw; Healed those it settled through
	// the Healer; Opened those no earlier run had reported (the rest were already open).
	Found  map[Kind]int `json:"found"`
	Healed map[Kind]int `json:"healed"`
	Opened map[Kind]int `json:"opened"`
	// HealedDifferences are the keys of the differences this run healed.
	HealedDifferences []string `json:"healed_differences"`
	// Differences are the keys of every difference found, in classification order.
	Differences []string `json:"differences"`
	// Replayed is true when the run had already been done and this is its stored report.
	Replayed bool `json:"replayed,omitempty"`
}

// DefaultWindow is the window of a scheduled run now.
func (r *Reconciler) DefaultWindow() Window {
	return DefaultWindow(r.now(), r.windowHours(), r.endOffset())
}

// Run reconciles w. A window that already has a report returns it (Replayed) without
// comparing again. Each difference no earlier run reported is opened through the Sink; if any
// Open fails, the run returns the error and stores no report, so a retry completes it.
func (r *Reconciler) Run(ctx context.Context, w Window) (Report, error) {
	if r.Store == nil || r.Provider == nil || r.Sink == nil {
		return Report{}, fmt.Errorf("%w: Store, Provider and Sink are required", ErrConfig)
	}
	started := r.now().UTC()
	w = w.normalized()
	if err := w.Validate(started); err != nil {
		return Report{}, err
	}
	id := w.RunID()
	log := r.log().With("run_id", id)
	if rep, err := GetReport(ctx, r.Store, id); err == nil {
		rep.Replayed = true
		log.InfoContext(ctx, "reconciliation already done for this window; returning its report")
		return rep, nil
	} else if !errors.Is(err, ErrNoReport) {
		return Report{}, err
	}

	snap, err := r.snapshot(ctx, w)
	if err != nil {
		return Report{}, fmt.Errorf("recon: %s: %w", id, err)
	}
	snap.Bounds = r.Bounds
	diffs := Classify(snap, r.grace())
	rep := Report{RunID: id, Window: w, StartedAt: started, ComparedLocal: len(snap.Local),
		ComparedProvider: len(snap.Remote), Found: map[Kind]int{}, Healed: map[Kind]int{}, Opened: map[Kind]int{},
		Differences: []string{}, HealedDifferences: []string{}}
	remotes := map[string]provider.Payment{}
	for _, rp := range snap.Remote {
		remotes[rp.ID] = rp
	}
	var errs []error
	for _, d := range diffs {
		d.RunID = id
		rep.Found[d.Kind]++
		rep.Differences = append(rep.Differences, d.Key)
		if healed, err := r.heal(ctx, d, remotes); err != nil {
			errs = append(errs, err)
			continue
		} else if healed {
			rep.Healed[d.Kind]++
			rep.HealedDifferences = append(rep.HealedDifferences, d.Key)
			continue
		}
		opened, err := r.open(ctx, d)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if opened {
			rep.Opened[d.Kind]++
			log.InfoContext(ctx, "difference opened", "key", d.Key, "class", d.Kind,
				"payment_id", d.PaymentID, "provider_payment_id", d.ProviderPaymentID)
		} else {
			log.DebugContext(ctx, "difference already open", "key", d.Key, "class", d.Kind)
		}
	}
	if err := errors.Join(errs...); err != nil {
		log.ErrorContext(ctx, "reconciliation could not open every difference; no report stored", "error", err)
		return Report{}, fmt.Errorf("recon: %s: %w", id, err)
	}
	rep.FinishedAt = r.now().UTC()
	rep.DurationMS = rep.FinishedAt.Sub(started).Milliseconds()
	stored, err := r.storeReport(ctx, rep)
	if err != nil {
		return Report{}, err
	}
	if stored.Replayed {
		return stored, nil // a concurrent run of the same window finished first
	}
	r.Metrics.emit(rep)
	log.InfoContext(ctx, "reconciliation finished", "from", w.From, "to", w.To, "compared_local", rep.ComparedLocal,
		"compared_provider", rep.ComparedProvider, "found", len(rep.Differences), "duration_ms", rep.DurationMS)
	return rep, nil
}

// Difference record states: opening until the Sink has it, then open; healed when a run
// settled it through the Healer.
const (
	stateOpening = "opening"
	stateOpen    = "open"
	stateHealed  = "healed"
)

type record struct {
	State      string     `json:"state"`
	Difference Difference `json:"difference"`
	// HealedBy is the run that healed it.
	HealedBy string `json:"healed_by,omitempty"`
}

// open reports d through the Sink unless an earlier run already did. The record is written
// first, conditionally, so two runs never both open it; a record left "opening" by a run that
// died before the Sink answered is opened again by the next run.
func (r *Reconciler) open(ctx context.Context, d Difference) (bool, error) {
	now := r.now()
	doc, err := json.Marshal(record{State: stateOpening, Difference: d})
	if err != nil {
		return false, err
	}
	it := store.Item{PK: d.Key, Doc: doc, ExpiresAt: now.Add(r.retention()).Unix()}
	err = r.Store.Put(ctx, DifferencesTable, it, store.Cond{Kind: store.NotExistsOrLapsed, Now: now.Unix()})
	var ce *store.ConditionError
	if errors.As(err, &ce) && ce.Old != nil {
		var old record
		if json.Unmarshal(ce.Old.Doc, &old) == nil && old.State == stateOpen {
			return false, nil
		}
		it.ExpiresAt = ce.Old.ExpiresAt
	} else if err != nil {
		return false, err
	}
	if err := r.Sink.Open(ctx, d); err != nil {
		return false, fmt.Errorf("open %s: %w", d.Key, err)
	}
	if it.Doc, err = json.Marshal(record{State: stateOpen, Difference: d}); err != nil {
		return false, err
	}
	return true, r.Store.Put(ctx, DifferencesTable, it, store.Cond{})
}

// Forget deletes the record of a difference, so that a later run finding it again reports it
// again (an operator who resolved it but wants to hear if it comes back).
func Forget(ctx context.Context, s store.Store, key string) error {
	return s.Delete(ctx, DifferencesTable, key, "", store.Cond{})
}

// ErrNoReport: no run has stored a report under the id.
var ErrNoReport = errors.New("recon: no report")

const runsIndex = "runs"

// GetReport reads a stored report.
func GetReport(ctx context.Context, s store.Store, runID string) (Report, error) {
	it, err := s.Get(ctx, RunsTable, runID, "")
	if errors.Is(err, store.ErrNotFound) {
		return Report{}, ErrNoReport
	}
	if err != nil {
		return Report{}, err
	}
	var rep Report
	if err := json.Unmarshal(it.Doc, &rep); err != nil {
		return Report{}, fmt.Errorf("recon: stored report %s: %w", runID, err)
	}
	return rep, nil
}

// ListReports pages through stored reports, latest window end first.
func ListReports(ctx context.Context, s store.Store, limit int, cursor string) ([]Report, string, error) {
	page, err := s.Query(ctx, store.Query{Table: RunsTable, Index: true, PK: runsIndex, Desc: true, Limit: limit, Cursor: cursor})
	if err != nil {
		return nil, "", err
	}
	out := make([]Report, 0, len(page.Items))
	for _, it := range page.Items {
		var rep Report
		if err := json.Unmarshal(it.Doc, &rep); err != nil {
			return nil, "", fmt.Errorf("recon: stored report %s: %w", it.PK, err)
		}
		out = append(out, rep)
	}
	return out, page.Cursor, nil
}

// storeReport writes rep once; if the run id already has a report, that one is returned.
func (r *Reconciler) storeReport(ctx context.Context, rep Report) (Report, error) {
	doc, err := json.Marshal(rep)
	if err != nil {
		return Report{}, err
	}
	it := store.Item{PK: rep.RunID, Doc: doc, IndexPK: runsIndex,
		IndexSK: rep.Window.To.UTC().Format(time.RFC3339) + "#" + rep.RunID}
	err = r.Store.Put(ctx, RunsTable, it, store.Cond{Kind: store.NotExists})
	if errors.Is(err, store.ErrConditionFailed) {
		old, gerr := GetReport(ctx, r.Store, rep.RunID)
		old.Replayed = true
		return old, gerr
	}
	return rep, err
}
