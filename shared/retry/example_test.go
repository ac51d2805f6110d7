package retry_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/retry"
)

type printSleeper struct{}

func (printSleeper) Sleep(_ context.Context, d time.Duration) error {
	fmt.Println("wait", d)
	return nil
}

func ExamplePolicy_Do() {
	p := retry.New(retry.Policy{
		Rand:    rand.New(rand.NewPCG(1, 2)),
		Sleeper: printSleeper{}, // tests and examples never sleep
		Log:     slog.New(slog.DiscardHandler),
	})

	answers := []error{
		&provider.ThrottledError{Op: "create", RetryAfter: 2 * time.Second},
		nil,
	}
	calls := 0
	err := p.Do(context.Background(), "create", true, func(context.Context) error {
		calls++
		return answers[calls-1]
	})
	fmt.Println(calls, err, p.Budget.Tokens())
	// Output:
	// wait 2s
	// 2 <nil> 500
}

func ExampleParseRetryAfter() {
	now := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	d, ok := retry.ParseRetryAfter("120", now)
	fmt.Println(d, ok)
	d, ok = retry.ParseRetryAfter("Sun, 29 Nov 2026 08:00:30 GMT", now)
	fmt.Println(d, ok)
	// Output:
	// 2m0s true
	// 30s true
}
