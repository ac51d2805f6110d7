package recovery_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/runtwice/twice/shared/declines"
	"github.com/runtwice/twice/shared/recovery"
)

func ExampleNextAttempt() {
	now := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	c := declines.Classify(declines.Decline{Code: "insufficient_funds", Network: declines.NetworkVisa})
	p := recovery.DefaultPolicy()
	p.AnchorSpread = 0 // exactly 09:00, for the example
	plan, err := recovery.NextAttempt(p, recovery.Input{
		Classification: c,
		Charges:        []recovery.Charge{{At: now, Result: recovery.ResultDeclined, Class: c.Class}},
	}, now, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(plan.Retry, plan.At.Format(time.RFC3339), plan.Attempt, plan.Reason)
	fmt.Println(plan.Explanation)
	// Output:
	// true 2026-12-01T09:00:00Z 2 funded_moment
	// Retrying on 1 Dec at 09:00 UTC, the next payday (the 1st or 15th of the month), because the card issuer declined: insufficient funds.
}

// ExampleSchedule prints the schedule each decline class gets from the default policy for a
// card that declines every time, starting on Sunday 29 Nov 2026 at 08:00 UTC. This table is
// the one in docs/recovery.md.
func ExampleSchedule() {
	first := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	thirtyDays := recovery.DefaultPolicy()
	thirtyDays.Window = 30 * 24 * time.Hour
	rows := []struct {
		name   string
		d      declines.Decline
		policy *recovery.Policy
		first  time.Time // when other than Sun 29 Nov 08:00
	}{
		{"insufficient_funds", declines.Decline{Code: "insufficient_funds", Network: declines.NetworkVisa}, nil, time.Time{}},
		{"insufficient_funds, declined Wed 16 Dec 10:00 (next payday past the window)", declines.Decline{Code: "insufficient_funds", Network: declines.NetworkVisa}, nil,
			time.Date(2026, 12, 16, 10, 0, 0, 0, time.UTC)},
		{"insufficient_funds, 30-day window", declines.Decline{Code: "insufficient_funds", Network: declines.NetworkVisa}, &thirtyDays, time.Time{}},
		{"card_velocity_exceeded", declines.Decline{Code: "card_velocity_exceeded", Network: declines.NetworkVisa}, nil, time.Time{}},
		{"processing_error", declines.Decline{Code: "processing_error", Network: declines.NetworkVisa}, nil, time.Time{}},
		{"generic_decline", declines.Decline{Code: "generic_decline", Network: declines.NetworkVisa}, nil, time.Time{}},
		{"MAC 25 (Mastercard)", declines.Decline{Code: "do_not_honor", NetworkAdviceCode: "25", Network: declines.NetworkMastercard}, nil, time.Time{}},
		{"lost_card", declines.Decline{Code: "lost_card", Network: declines.NetworkVisa}, nil, time.Time{}},
	}
	fmt.Println("| decline | retries (original charge Sun 29 Nov 08:00 UTC) | then |")
	fmt.Println("|---|---|---|")
	for _, r := range rows {
		p := recovery.DefaultPolicy()
		if r.policy != nil {
			p = *r.policy
		}
		start := first
		if !r.first.IsZero() {
			start = r.first
		}
		plans, err := recovery.Schedule(p, declines.Classify(r.d), start, rand.New(rand.NewPCG(1, 2)))
		if err != nil {
			fmt.Println(err)
			return
		}
		var at []string
		for _, p := range plans[:len(plans)-1] {
			at = append(at, p.At.Format("Mon 2 Jan 15:04:05"))
		}
		if len(at) == 0 {
			at = append(at, "none")
		}
		stop := plans[len(plans)-1]
		then := string(stop.Reason)
		if stop.Limit != "" {
			then += " (" + string(stop.Limit) + ")"
		}
		fmt.Printf("| %s | %s | stop: %s |\n", r.name, strings.Join(at, ", "), then)
	}
	// Output:
	// | decline | retries (original charge Sun 29 Nov 08:00 UTC) | then |
	// |---|---|---|
	// | insufficient_funds | Tue 1 Dec 09:46:10, Sat 12 Dec 09:37:00 | stop: exhausted (window) |
	// | insufficient_funds, declined Wed 16 Dec 10:00 (next payday past the window) | Wed 30 Dec 09:46:10 | stop: exhausted (window) |
	// | insufficient_funds, 30-day window | Tue 1 Dec 09:46:10, Tue 15 Dec 09:37:00, Mon 28 Dec 09:47:04 | stop: exhausted (window) |
	// | card_velocity_exceeded | Mon 30 Nov 09:46:10, Tue 1 Dec 09:37:00, Wed 2 Dec 09:47:04, Thu 3 Dec 09:47:48, Fri 4 Dec 09:14:04, Sat 5 Dec 09:02:29, Sun 6 Dec 09:30:00, Mon 7 Dec 09:26:58 | stop: exhausted (max_attempts) |
	// | processing_error | Sun 29 Nov 08:00:47, Sun 29 Nov 08:02:01, Sun 29 Nov 08:05:10, Sun 29 Nov 08:11:33, Sun 29 Nov 08:15:18, Sun 29 Nov 08:16:38, Sun 29 Nov 08:46:38, Sun 29 Nov 09:13:36 | stop: exhausted (max_attempts) |
	// | generic_decline | Mon 30 Nov 12:36:59, Wed 2 Dec 16:18:55, Fri 4 Dec 21:01:19, Mon 7 Dec 01:48:06 | stop: exhausted (schedule) |
	// | MAC 25 (Mastercard) | Mon 30 Nov 08:00:00, Tue 1 Dec 08:00:00, Wed 2 Dec 08:00:00, Thu 3 Dec 08:00:00, Fri 4 Dec 08:00:00, Sat 5 Dec 08:00:00, Sun 6 Dec 08:00:00, Mon 7 Dec 08:00:00 | stop: exhausted (max_attempts) |
	// | lost_card | none | stop: needs_customer |
}
