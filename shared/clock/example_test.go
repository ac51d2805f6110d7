package clock_test

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/runtwice/twice/shared/clock"
)

// A test drives code that waits: it blocks until the code is waiting, then moves time.
func Example() {
	c := clock.NewFake(time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC))
	woke := make(chan time.Time)
	go func() { // the code under test: wait an hour
		t := c.NewTimer(time.Hour)
		defer t.Stop()
		woke <- <-t.C()
	}()

	c.BlockUntil(1)
	c.Advance(59 * time.Minute)
	fmt.Println("pending after 59m:", c.Waiters())
	c.Advance(time.Minute)
	fmt.Println("woke at", (<-woke).Format(time.Kitchen))
	// Output:
	// pending after 59m: 1
	// woke at 10:00AM
}

// An Accelerated clock is three numbers, so it persists as JSON; Rebase changes its speed
// without a jump.
func ExampleAccelerated() {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := &clock.Accelerated{Base: start, Anchor: start, Factor: 60}
	fmt.Println(c.At(start.Add(10 * time.Second)).Format(time.TimeOnly)) // 10s of wall time: 10m

	b, _ := json.Marshal(c)
	var restored clock.Accelerated
	_ = json.Unmarshal(b, &restored)
	wall := start.Add(time.Minute)
	fmt.Println(restored.At(wall).Format(time.TimeOnly))

	slower := restored.Rebase(wall, 1)
	fmt.Println(slower.At(wall.Add(time.Minute)).Format(time.TimeOnly))
	// Output:
	// 00:10:00
	// 01:00:00
	// 01:01:00
}
