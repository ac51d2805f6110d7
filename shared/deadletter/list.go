package deadletter

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/runtwice/twice/shared/store"
)

// Filter selects records for List and BulkRetry. The zero Status means open.
type Filter struct {
	Status Status
	Source Source
	Cause  Cause
	// From and To bound the creation time, both inclusive; zero means unbounded.
	From, To time.Time
	// Text matches, case-insensitively, the id, key, payment and event ids, the explanation
	// and the payload.
	Text   string
	Limit  int
	Cursor string
}

// Page is one page of a List, newest first. Cursor is "" when nothing more can match.
type Page struct {
	Records []Record `json:"records"`
	Cursor  string   `json:"cursor,omitempty"`
	// Scanned is how many records were read to fill the page.
	Scanned int `json:"scanned"`
}

// List returns the records matching f, newest first.
//
// Cost: one index query per 100 records of the status partition within the time range;
// source, cause and text filters are applied in memory. A selective filter over a large
// partition therefore reads many items for few results: one call reads at most MaxScan items
// and then returns a cursor (perhaps with fewer than Limit records), so a page is bounded in
// time and the caller pages on. The cursor is the position in the index, so records opened
// meanwhile never shift a page.
func (t *Records) List(ctx context.Context, f Filter) (Page, error) {
	if f.Status == "" {
		f.Status = StatusOpen
	}
	if !f.Status.Valid() {
		return Page{}, fmt.Errorf("%w: status %q", ErrInvalid, f.Status)
	}
	if f.Limit <= 0 {
		f.Limit = DefaultLimit
	}
	if f.Limit > MaxLimit {
		f.Limit = MaxLimit
	}
	q := store.Query{Table: Table, Index: true, PK: "status#" + string(f.Status), Desc: true, Limit: 100}
	if !f.From.IsZero() {
		q.SKFrom = f.From.UTC().Format(skTime)
	}
	if !f.To.IsZero() {
		q.SKTo = f.To.UTC().Format(skTime) + "#~"
	}
	after := ""
	if f.Cursor != "" {
		sk, err := DecodeCursor(f.Cursor)
		if err != nil {
			return Page{}, err
		}
		after = sk
		if q.SKTo == "" || sk < q.SKTo {
			q.SKTo = sk
		}
	}
	text := strings.ToLower(f.Text)
	var out Page
	out.Records = []Record{}
	last := ""
	for {
		page, err := t.Store.Query(ctx, q)
		if err != nil {
			return Page{}, fmt.Errorf("deadletter: list: %w", err)
		}
		for i, it := range page.Items {
			if it.IndexSK == after {
				continue
			}
			out.Scanned++
			last = it.IndexSK
			r, err := decode(it)
			if err != nil {
				return Page{}, err
			}
			if f.matches(r, text) {
				out.Records = append(out.Records, r)
			}
			more := i < len(page.Items)-1 || page.Cursor != ""
			if (len(out.Records) == f.Limit || out.Scanned >= MaxScan) && more {
				out.Cursor = EncodeCursor(last)
				return out, nil
			}
		}
		if page.Cursor == "" {
			return out, nil
		}
		q.Cursor = page.Cursor
	}
}

func (f Filter) matches(r Record, lowerText string) bool {
	if f.Source != "" && r.Source != f.Source {
		return false
	}
	if f.Cause != "" && r.Cause != f.Cause {
		return false
	}
	if lowerText == "" {
		return true
	}
	for _, s := range []string{r.ID, r.Key, r.PaymentID, r.EventID, r.IdempotencyKey, r.Explanation, string(r.Cause), string(r.Payload)} {
		if strings.Contains(strings.ToLower(s), lowerText) {
			return true
		}
	}
	return false
}

// EncodeCursor and DecodeCursor turn an index position into an opaque cursor and back.
func EncodeCursor(sk string) string { return base64.RawURLEncoding.EncodeToString([]byte(sk)) }

// DecodeCursor returns the index position of a cursor, or ErrInvalid.
func DecodeCursor(c string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(b) < len(skTime) || len(b) > 128 || !utf8.Valid(b) {
		return "", fmt.Errorf("%w: cursor", ErrInvalid)
	}
	if _, err := time.Parse(skTime, string(b[:len(skTime)])); err != nil {
		return "", fmt.Errorf("%w: cursor", ErrInvalid)
	}
	return string(b), nil
}
