package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/runtwice/twice/infra/asl"
	"github.com/runtwice/twice/shared/clock"
)

// opsClient reads the stack's operator API.
type opsClient struct {
	*simClient // the same JSON calls, with the operator token as bearer
}

// deadLetters counts the dead-letter records by source and class, or returns nil when the stack
// has no operator route for them.
func (o opsClient) deadLetters(ctx context.Context) map[string]int {
	out := map[string]int{}
	cursor := ""
	for range 10_000 { // bounded: 2 M records
		q := url.Values{"limit": {"200"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page struct {
			Records []struct {
				Source string `json:"source"`
				Class  string `json:"class"`
			} `json:"records"`
			Cursor string `json:"cursor"`
		}
		if err := o.do(ctx, http.MethodGet, "/ops/deadletters?"+q.Encode(), nil, &page); err != nil {
			return nil
		}
		for _, r := range page.Records {
			out[r.Source+"/"+r.Class]++
		}
		if page.Cursor == "" || len(page.Records) == 0 {
			break
		}
		cursor = page.Cursor
	}
	return out
}

// reconcile runs a reconciliation over [from, to] and returns the differences it found by class,
// or nil when the stack has no such route or every try failed. A run that failed (a throttled
// call it could not retry before its deadline) is tried again a few times, as the scheduler's
// retry policy does in AWS: the run id is the window, so a repeat is harmless.
func (o opsClient) reconcile(ctx context.Context, from, to time.Time) map[string]int {
	var rep struct {
		Found map[string]int `json:"found"`
	}
	body := map[string]string{"from": from.UTC().Format(time.RFC3339), "to": to.UTC().Format(time.RFC3339)}
	for try := 1; ; try++ {
		err := o.do(ctx, http.MethodPost, "/ops/reconcile", body, &rep)
		if err == nil {
			break
		}
		if try == reconcileTries {
			return nil
		}
		t := time.NewTimer(time.Duration(try) * time.Second)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
	if rep.Found == nil {
		rep.Found = map[string]int{}
	}
	return rep.Found
}

// reconcileTries bounds the tries of one reconciliation run.
const reconcileTries = 4

// recoveryMachine is the local state machine's name (infra/inprocess).
const recoveryMachine = "payment-recovery"

// readRecoveries counts the recovery executions in a stopped stack's data directory: the local
// runner keeps them in twice.db, and no route lists them.
func readRecoveries(ctx context.Context, data string) (*Recoveries, error) {
	db, err := bolt.Open(filepath.Join(data, "twice.db"), 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return nil, err
	}
	defer db.Close()
	store, err := asl.NewBoltStore(db)
	if err != nil {
		return nil, err
	}
	recs, err := store.List(ctx, recoveryMachine)
	if err != nil {
		return nil, err
	}
	// A recovery runs as several executions: each ends at a wait (parked) and a timer starts the
	// next, named "<first>-w<seq>". The recovery's outcome is its last execution's.
	last := map[string]*asl.Record{}
	seqOf := func(name string) int64 {
		m := resumedName.FindStringSubmatch(name)
		if m == nil {
			return -1
		}
		n, _ := strconv.ParseInt(m[1], 10, 64)
		return n
	}
	for _, rec := range recs {
		base := resumedName.ReplaceAllString(rec.Execution.Name, "")
		if cur, ok := last[base]; !ok || seqOf(rec.Execution.Name) > seqOf(cur.Execution.Name) {
			last[base] = rec
		}
	}
	r := &Recoveries{Started: len(last)}
	for _, rec := range last {
		ex := rec.Execution
		var out struct {
			Outcome string `json:"outcome"`
			Plan    struct {
				Retry       bool   `json:"retry"`
				Reason      string `json:"reason"`
				Explanation string `json:"explanation"`
			} `json:"plan"`
			DeadLetter struct {
				ID string `json:"id"`
			} `json:"dead_letter"`
		}
		_ = json.Unmarshal(ex.Output, &out)
		switch ex.Status {
		case asl.StatusSucceeded:
			if out.Outcome == "succeeded" || out.Outcome == "settled" {
				r.Succeeded++
				continue
			}
			if out.Plan.Retry {
				r.Running++ // parked: its timer resumes it
				continue
			}
			r.Stopped++
			// A stop names its reason and explains it, and a person has its record.
			if out.Plan.Reason == "" || out.Plan.Explanation == "" || out.DeadLetter.ID == "" {
				r.Unnamed++
			}
		case asl.StatusRunning:
			r.Running++
		default:
			r.Failed++
			if ex.Error == "" {
				r.Unnamed++
			}
		}
	}
	return r, nil
}

// resumedName matches the suffix of an execution that resumed a recovery after a wait
// (recovery.ResumeName), with its sequence.
var resumedName = regexp.MustCompile(`-w([0-9]+)$`)

func (r *Recoveries) String() string {
	return fmt.Sprintf("%d started: %d recovered, %d stopped (dead letter), %d still waiting, %d failed",
		r.Started, r.Succeeded, r.Stopped, r.Running, r.Failed)
}

// stackNow reads the stack's clock from its data directory (clock.json, written by
// infra/inprocess), so that windows sent to the stack are in its time, not the wall's.
func stackNow(data string) (time.Time, error) {
	b, err := os.ReadFile(filepath.Join(data, "clock.json"))
	if err != nil {
		return time.Time{}, err
	}
	var f struct {
		Domain *clock.Accelerated `json:"domain"`
	}
	if err := json.Unmarshal(b, &f); err != nil || f.Domain == nil {
		return time.Time{}, fmt.Errorf("chaos: clock.json has no stack clock: %v", err)
	}
	return f.Domain.Now(), nil
}

// jumpClock moves the stack's clock in its data directory forward by d while the stack is
// down, as if it had been down that long (infra/inprocess keeps the clock in clock.json).
func jumpClock(data string, d time.Duration) error {
	path := filepath.Join(data, "clock.json")
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("chaos: clock jump: %w", err)
	}
	var f map[string]json.RawMessage
	var c clock.Accelerated
	if err := json.Unmarshal(b, &f); err != nil || f["domain"] == nil || json.Unmarshal(f["domain"], &c) != nil {
		return fmt.Errorf("chaos: clock jump: clock.json has no stack clock")
	}
	c.Base = c.Base.Add(d)
	if f["domain"], err = json.Marshal(c); err != nil {
		return err
	}
	if b, err = json.Marshal(f); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
