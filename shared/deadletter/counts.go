package deadletter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/runtwice/twice/shared/store"
)

// OpenCount returns the number of open records.
func (t *Records) OpenCount(ctx context.Context) (int64, error) {
	it, err := t.Store.Get(ctx, Table, counterPK, "")
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("deadletter: read counter: %w", err)
	}
	var c counter
	if err := json.Unmarshal(it.Doc, &c); err != nil {
		return 0, fmt.Errorf("deadletter: decode counter: %w", err)
	}
	return c.Open, nil
}

// HourCount is the open count at the end of an hour (or now, for the current hour).
type HourCount struct {
	Hour time.Time `json:"hour"`
	Open int64     `json:"open"`
}

// OpenHistory returns one count per hour for the hours ending at now, oldest first. Hours in
// which nothing changed carry the previous hour's count.
func (t *Records) OpenHistory(ctx context.Context, hours int) ([]HourCount, error) {
	if hours <= 0 || hours > 24*31 {
		return nil, fmt.Errorf("%w: hours %d", ErrInvalid, hours)
	}
	end := t.now().UTC().Truncate(time.Hour)
	start := end.Add(-time.Duration(hours-1) * time.Hour)
	// The hour before the window gives the starting level.
	var before int64
	prev, err := t.Store.Query(ctx, store.Query{Table: Table, Index: true, PK: hourlyPK,
		SKTo: start.Add(-time.Hour).Format(hourLayout), Desc: true, Limit: 1})
	if err != nil {
		return nil, fmt.Errorf("deadletter: read history: %w", err)
	}
	if len(prev.Items) == 1 {
		var h HourCount
		if json.Unmarshal(prev.Items[0].Doc, &h) == nil {
			before = h.Open
		}
	}
	known := map[string]int64{}
	q := store.Query{Table: Table, Index: true, PK: hourlyPK, SKFrom: start.Format(hourLayout), SKTo: end.Format(hourLayout)}
	for {
		page, err := t.Store.Query(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("deadletter: read history: %w", err)
		}
		for _, it := range page.Items {
			var h HourCount
			if json.Unmarshal(it.Doc, &h) == nil {
				known[it.IndexSK] = h.Open
			}
		}
		if page.Cursor == "" {
			break
		}
		q.Cursor = page.Cursor
	}
	out := make([]HourCount, 0, hours)
	level := before
	for h := start; !h.After(end); h = h.Add(time.Hour) {
		if n, ok := known[h.Format(hourLayout)]; ok {
			level = n
		}
		out = append(out, HourCount{Hour: h, Open: level})
	}
	return out, nil
}
