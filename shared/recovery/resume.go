package recovery

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/store"
)

// Waits leave the execution. An open Standard execution counts against Step Functions' quota
// of open executions (1,000,000 per account and region by default), and a recovery waits for
// days, so an execution ends at each wait: the park step commits, in one transaction, the
// recovery's parked state and a timer (a KindResume outbox message due at the planned moment,
// outbox.NewAt: one DynamoDB item, no count quota). When the timer fires, the relay starts a
// new execution of the same state machine (ResumeFollowOn), whose input is the parked state
// marked as a resume; its first state sends it to Charge, or to Steer when a steering signal
// is stored. Its name derives from the recovery and the parked state's sequence (ResumeName),
// so a second delivery of the timer, or a timer that fires after a steered resume, finds the
// execution already started and does nothing.

// KindResume is the outbox kind of a parked recovery's timer (payload Resume).
const KindResume = "resume_recovery"

// How a resumed execution goes on: the execution input's "resume" field, which the state
// machine's first state reads.
const (
	ResumeCharge = "charge" // the planned moment came: charge
	ResumeSteer  = "steer"  // a steering signal is stored: apply it
)

// Resume is a KindResume message: the execution to start and the parked state.
type Resume struct {
	Execution string `json:"execution"`
	State     State  `json:"state"`
	// ParkedAt is the workflow's time when the recovery parked, and RelayAt the relay's clock
	// then (they differ on the local stack with a time factor).
	ParkedAt time.Time `json:"parked_at"`
	RelayAt  time.Time `json:"clock"`
}

// ResumeInput is the input of a resumed execution: the parked state, how it goes on, and when
// it parked (for a runner that keeps the workflow's time, WorkflowTime).
type ResumeInput struct {
	State
	Resume   string    `json:"resume"`
	ParkedAt time.Time `json:"parked_at"`
	RelayAt  time.Time `json:"clock"`
}

// WorkflowTime is the workflow's time at which an execution resumed at now (on the relay's
// clock) starts, when the workflow's time runs factor times faster than the relay's (the
// local stack's -time-factor): the parked time plus the time since, never past the planned
// moment (a timer fires a little after it on the relay's clock; the charge is at the moment).
// On AWS (factor 1) it is at most now, and the steps take the later of it and their clock.
func (in ResumeInput) WorkflowTime(now time.Time, factor float64) time.Time {
	elapsed := float64(now.Sub(in.RelayAt)) * max(factor, 1)
	if in.Plan != nil && in.Plan.Retry && elapsed >= float64(in.Plan.At.Sub(in.ParkedAt)) {
		return in.Plan.At
	}
	return in.ParkedAt.Add(time.Duration(min(elapsed, float64(math.MaxInt64))))
}

// ResumeName is the name of the execution that resumes st after its wait: the recovery's
// execution name and the parked state's sequence, "inv_42-r1-w12". Every original name ends in
// "-r<round>", so no invoice's name can be a resume's.
func ResumeName(st State) string {
	key := cmp.Or(st.Invoice, st.PaymentID)
	suffix := "-w" + strconv.FormatInt(st.Seq, 10)
	if name := ExecutionName(key, st.Round); len(name)+len(suffix) <= maxNameLen {
		return name + suffix
	}
	return hashedName(key, st.Round) + suffix
}

// resumeID is the outbox id of the timer that resumes st.
func resumeID(st State) string { return "resume#" + ResumeName(st) }

// park ends the execution at the wait for st's plan: it commits the recovery's parked state
// with the timer that resumes it at the planned moment. A signal already stored (it came
// before the park) brings the timer forward at once.
func (s *Steps) park(ctx context.Context, st State, now time.Time) (map[string]string, error) {
	if st.Plan == nil || !st.Plan.Retry {
		return nil, invalid("park needs a retry plan")
	}
	p, err := s.payment(ctx, st.PaymentID)
	if err != nil {
		return nil, err
	}
	clock := s.now()
	wait := max(st.Plan.At.Sub(now), 0)
	if s.TimeFactor > 1 {
		// Rounded up: the resumed execution's time (WorkflowTime) is then never before the
		// planned moment.
		wait = time.Duration(math.Ceil(float64(wait) / s.TimeFactor))
	}
	id := resumeID(st)
	timer, err := outbox.NewAt(KindResume, id, Resume{Execution: ResumeName(st), State: st, ParkedAt: now.UTC(), RelayAt: clock.UTC()},
		clock.Add(wait), clock)
	if err != nil {
		return nil, invalid("encode the timer of %s: %w", st.PaymentID, err)
	}
	rec := s.recoveryRecord(st, p, now, phaseParked)
	rec.Resume = id
	rec.Seq = int64(st.Round)<<40 | (st.Seq+1)<<4 | phaseParked
	if err := s.commit(ctx, p, nil, rec, timer); err != nil {
		return nil, err
	}
	s.log().InfoContext(ctx, "recovery parked", "payment_id", st.PaymentID, "execution", ResumeName(st),
		"at", st.Plan.At, "due", clock.Add(wait))
	pending, err := GetSteer(ctx, s.Store, st.PaymentID)
	if err != nil {
		return nil, &TransientError{Op: StepPark, Err: err}
	}
	if pending != nil {
		if err := bringForward(ctx, s.Store, id, s.now()); err != nil {
			return nil, &TransientError{Op: StepPark, Err: err}
		}
	}
	return map[string]string{"resume": ResumeName(st)}, nil
}

// bringForward writes the timer id again due now, so that the relay delivers it at once. A
// timer already delivered (its resumed execution runs and will read the signal) stays gone.
func bringForward(ctx context.Context, st store.Store, id string, now time.Time) error {
	it, err := st.Get(ctx, outbox.Table, id, "")
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	m, err := outbox.Decode(it)
	if err != nil {
		return err
	}
	if m.Kind != KindResume {
		return fmt.Errorf("recovery: %s is a %s message, not a timer", id, m.Kind)
	}
	w, err := outbox.NewAt(KindResume, m.ID, m.Payload, now, now)
	if err != nil {
		return err
	}
	w.Put.Version = max(w.Put.Version, it.Version+1)
	w.Cond = store.Cond{Kind: store.VersionIs, Version: it.Version}
	if err := st.Put(ctx, outbox.Table, *w.Put, w.Cond); err != nil && !errors.Is(err, store.ErrConditionFailed) {
		return err
	}
	return nil
}

// ResumeFollowOn is the outbox relay's handler of KindResume, on a Steerer with the Starter: it
// starts the execution that resumes the parked recovery, to Steer when a signal is stored and
// to Charge otherwise. An execution already started under the name (a second delivery, a
// timer firing after a steered resume) counts as started: the Starter returns nil.
func (s *Steerer) ResumeFollowOn() outbox.Handler {
	return func(ctx context.Context, m outbox.Message) error {
		var r Resume
		if err := json.Unmarshal(m.Payload, &r); err != nil || r.Execution == "" || r.State.PaymentID == "" {
			return fmt.Errorf("recovery: resume message %s: not a resume (%v)", m.ID, err)
		}
		if s.Starter == nil {
			return errors.New("recovery: no Starter to resume a parked recovery")
		}
		pending, err := GetSteer(ctx, s.Store, r.State.PaymentID)
		if err != nil {
			return err
		}
		in := ResumeInput{State: r.State, Resume: ResumeCharge, ParkedAt: r.ParkedAt, RelayAt: r.RelayAt}
		if pending != nil {
			in.Resume = ResumeSteer
		}
		raw, err := json.Marshal(in)
		if err != nil {
			return err
		}
		return s.Starter.Start(ctx, r.Execution, raw)
	}
}
