package resolvequeue_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/idempotency"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/payments/resolvequeue"
)

// A busy job comes back after the keeper's suggested wait on its first delivery and not before
// the holder's lock lapses on a later one; any other failure is left to the queue's timeout.
func TestComeBack(t *testing.T) {
	now := time.Date(2029, 9, 4, 22, 43, 0, 0, time.UTC)
	held := &payments.BusyError{RetryAfter: 2 * time.Second, LockExpiresAt: now.Add(30 * time.Second)}
	tests := map[string]struct {
		err      error
		receives int
		want     time.Duration
		wantOK   bool
	}{
		"first delivery: the suggested wait":        {err: held, receives: 1, want: 2 * time.Second, wantOK: true},
		"later delivery: until the lock lapses":     {err: fmt.Errorf("resolve: %w", held), receives: 2, want: 30 * time.Second, wantOK: true},
		"lock about to lapse: the suggested wait":   {err: &payments.BusyError{RetryAfter: time.Second, LockExpiresAt: now.Add(300 * time.Millisecond)}, receives: 3, want: time.Second, wantOK: true},
		"lapse unknown: the suggested wait":         {err: &payments.BusyError{RetryAfter: 2 * time.Second}, receives: 4, want: 2 * time.Second, wantOK: true},
		"the message's own key held":                {err: &idempotency.InProgressError{Key: "k", RetryAfter: time.Second, LockExpiresAt: now.Add(8 * time.Second)}, receives: 2, want: 8 * time.Second, wantOK: true},
		"provider unavailable: the queue's backoff": {err: payments.ErrBusy, receives: 1},
		"any other failure: the queue's backoff":    {err: errors.New("store down"), receives: 1},
		"success":                                   {err: nil, receives: 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := resolvequeue.ComeBack(tc.err, tc.receives, now)
			if got != tc.want || ok != tc.wantOK {
				t.Fatalf("ComeBack = %v, %v; want %v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
	if !errors.Is(held, payments.ErrBusy) {
		t.Fatal("a BusyError is not ErrBusy")
	}
}
