package store

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"

	"golang.org/x/sync/errgroup"
)

// Shards spreads one logical secondary-index partition over N physical ones, "Base#00" to
// "Base#NN", each item's chosen by a hash of its id. DynamoDB serves at most 1,000 write units
// a second to one partition of a global secondary index, and an index partition that every
// payment writes (the outbox's due list, the payments of a day) would reach that at a few
// hundred payments a second; spread over N it takes N times that. Readers walk every shard
// and merge them in sort-key order (Walk), so the logical partition reads as before.
// docs/capacity.md gives each index's N against the rate it must carry.
type Shards struct {
	Base string
	N    int
}

// Of is the physical partition of the item with id.
func (s Shards) Of(id string) string {
	h := fnv.New32a()
	h.Write([]byte(id))
	return s.partition(int(h.Sum32() % uint32(max(s.N, 1))))
}

func (s Shards) partition(i int) string { return fmt.Sprintf("%s#%02d", s.Base, i) }

// Partitions lists every physical partition, in order.
func (s Shards) Partitions() []string {
	out := make([]string, max(s.N, 1))
	for i := range out {
		out[i] = s.partition(i)
	}
	return out
}

// Holds reports whether pk is one of the physical partitions.
func (s Shards) Holds(pk string) bool { return slices.Contains(s.Partitions(), pk) }

// WalkReaders is how many shards' first pages Walk reads at once.
const WalkReaders = 8

// Walk calls fn with every item of the logical partition that q bounds (q.Table, q.SKFrom,
// q.SKTo; q.Index is implied, q.PK, q.Desc and q.Cursor are ignored), in ascending sort-key
// order across the shards: a merge of each shard's pages of q.Limit, the first pages read side
// by side (WalkReaders at a time), each later page when the merge reaches it. fn returning
// false ends the walk. fn may write the items it is given.
func (s Shards) Walk(ctx context.Context, st Store, q Query, fn func(Item) bool) error {
	type head struct {
		items  []Item
		cursor string
		done   bool
	}
	q.Index, q.Desc, q.Cursor = true, false, ""
	parts := s.Partitions()
	heads := make([]head, len(parts))
	fill := func(i int) error {
		for len(heads[i].items) == 0 && !heads[i].done {
			sq := q
			sq.PK, sq.Cursor = parts[i], heads[i].cursor
			page, err := st.Query(ctx, sq)
			if err != nil {
				return fmt.Errorf("store: query %s: %w", parts[i], err)
			}
			heads[i].items, heads[i].cursor = page.Items, page.Cursor
			heads[i].done = page.Cursor == ""
		}
		return nil
	}
	// Every shard's first page is needed before the first item can be merged: read them side
	// by side. One after another, a day's 64 partitions under throttling added up their
	// backoffs (a reconciliation reads several days' worth) past a request's deadline.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(WalkReaders)
	for i := range heads {
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			return fill(i)
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for {
		next := -1
		for i, h := range heads {
			if len(h.items) > 0 && (next < 0 || h.items[0].IndexSK < heads[next].items[0].IndexSK) {
				next = i
			}
		}
		if next < 0 {
			return nil
		}
		it := heads[next].items[0]
		heads[next].items = heads[next].items[1:]
		if !fn(it) {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fill(next); err != nil {
			return err
		}
	}
}

// Page reads one page of the logical partition in ascending sort-key order: up to limit items
// after the cursor (a previous page's; "" for the first), and the cursor of the next page, ""
// when there is none. The cursor is the last item's index sort key, so sort keys must be
// unique within the logical partition (they end in the item's id everywhere they are used).
func (s Shards) Page(ctx context.Context, st Store, table string, limit int, cursor string) (Page, error) {
	if limit <= 0 {
		limit = 100
	}
	var p Page
	// Each shard holds about limit/N of a page, so each is read in pages of that size (one
	// more than the page and the cursor's item need); a shard that runs out is read again.
	// The cursor bound is inclusive: the item at the cursor is read again and skipped.
	perShard := (limit+max(s.N, 1)-1)/max(s.N, 1) + 2
	err := s.Walk(ctx, st, Query{Table: table, SKFrom: cursor, Limit: perShard}, func(it Item) bool {
		if cursor != "" && it.IndexSK <= cursor {
			return true
		}
		if len(p.Items) == limit {
			p.Cursor = p.Items[limit-1].IndexSK
			return false
		}
		p.Items = append(p.Items, it)
		return true
	})
	return p, err
}
