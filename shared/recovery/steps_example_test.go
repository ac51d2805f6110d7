package recovery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/runtwice/twice/shared/boltstore"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/recovery"
	"github.com/runtwice/twice/shared/recovery/recoverytest"
)

func ExampleExecutionName() {
	fmt.Println(recovery.ExecutionName("in_1NqX2Y", 1))
	fmt.Println(recovery.ExecutionName("in_1NqX2Y", 2))
	fmt.Println(recovery.ExecutionName("2026/11 #42", 1)) // outside the name rules: hashed
	// Output:
	// in_1NqX2Y-r1
	// in_1NqX2Y-r2
	// 20261142-cd6136a0ee687e4e-r1
}

// printSink prints the dead letters it opens.
type printSink struct{}

func (printSink) Open(_ context.Context, d recovery.DeadLetter) error {
	fmt.Println(d.Reason + ": " + d.SuggestedAction)
	return nil
}

// ExampleSteps_Handle plans a recovery for a card reported lost: it stops at once, and the
// dead-letter step says what to do.
func ExampleSteps_Handle() {
	dir, _ := os.MkdirTemp("", "recovery-example")
	defer os.RemoveAll(dir)
	st, _ := boltstore.Open(filepath.Join(dir, "twice.db"))
	defer st.Close()
	now := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	p := payments.Payment{ID: "pay_1", Invoice: "inv_1", Status: provider.StatusDeclined, ProviderPaymentID: "pi_1",
		Decline: &provider.Decline{Code: "lost_card"}, CreatedAt: now, UpdatedAt: now,
		Version: payments.VersionAt(now, provider.StatusDeclined)}
	w, _ := p.Put()
	_ = st.Put(context.Background(), w.Table, *w.Put, w.Cond)

	steps, err := recovery.NewSteps(recovery.Steps{Provider: &recoverytest.Provider{}, Store: st, DeadLetters: printSink{},
		Now: func() time.Time { return now }, Rand: rand.New(rand.NewPCG(1, 2)), Log: discard()})
	if err != nil {
		fmt.Println(err)
		return
	}
	input, _ := recovery.StartInput(p, 1)
	out, err := steps.Handle(context.Background(), json.RawMessage(`{"step":"plan","state":`+string(input)+`}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	var state recovery.State
	_ = json.Unmarshal(out, &state)
	fmt.Println(state.Plan.Retry, state.Plan.Explanation)
	_, _ = steps.Handle(context.Background(), json.RawMessage(`{"step":"dead_letter","state":`+string(out)+`}`))
	// Output:
	// false Not retrying because the card issuer declined: the card was reported lost; the customer needs to add a new payment method.
	// needs_customer: Do not retry this card; ask the customer for another payment method.
}
