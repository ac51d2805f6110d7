package asl_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/runtwice/twice/infra/asl"
	"github.com/runtwice/twice/shared/clock"
	bolt "go.etcd.io/bbolt"
)

// Example runs the recovery example in testdata on a fake clock: classify plans an attempt
// an hour ahead, the Wait sleeps until then, the charge succeeds.
func Example() {
	dir, _ := os.MkdirTemp("", "asl-example")
	defer os.RemoveAll(dir)
	db, _ := bolt.Open(filepath.Join(dir, "local.db"), 0o600, nil)
	defer db.Close()
	store, _ := asl.NewBoltStore(db)

	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := clock.NewFake(start)
	tasks := asl.TaskRegistry{
		"classify": func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return json.Marshal(map[string]any{"retry": true, "attempt": 1, "at": start.Add(time.Hour).Format(time.RFC3339)})
		},
		"charge": func(_ context.Context, in json.RawMessage) (json.RawMessage, error) {
			var p struct {
				Key string `json:"idempotency_key"`
			}
			_ = json.Unmarshal(in, &p)
			fmt.Println("charge with key", p.Key)
			return json.RawMessage(`{"outcome":"succeeded"}`), nil
		},
	}
	runner := asl.New(store, tasks, asl.WithClock(clock), asl.WithRand(rand.New(rand.NewPCG(1, 1))),
		asl.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	defer runner.Close()

	raw, _ := os.ReadFile("testdata/recovery-example.asl.json")
	def := asl.Substitute(raw, map[string]string{"ClassifyFunctionArn": "classify", "ChargeFunctionArn": "charge"})
	if err := runner.Define("payment-recovery", def); err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	ex, err := runner.StartExecution(ctx, "payment-recovery", "inv_42-1", []byte(`{"invoice":"inv_42"}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	clock.BlockUntil(1) // the Wait is pending
	waited, _ := clock.AdvanceToNext()
	ex, _ = runner.AwaitExecution(ctx, ex.ExecutionArn)
	fmt.Println("waited", waited)
	fmt.Println(ex.Status, "after", ex.StateTransitions, "transitions")
	// Output:
	// charge with key inv_42:1
	// waited 1h0m0s
	// SUCCEEDED after 6 transitions
}
