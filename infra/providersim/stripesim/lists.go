package stripesim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// The list routes page as Stripe pages: newest first, at most limit items with has_more, after
// starting_after or before ending_before.

// errPageEnd ends a page walk early: nothing further in the index can match.
var errPageEnd = errors.New("stripesim: end of the page walk")

// collectPage gathers up to limit items from the cursor position k, v: towards older keys, or
// towards newer ones when forward (ending_before), that page then put newest first. item
// returns a key's entry, false to skip the key, or errPageEnd to stop.
func collectPage(c *bolt.Cursor, k, v []byte, forward bool, limit int,
	item func(k, v []byte) (json.RawMessage, bool, error)) (data []json.RawMessage, hasMore bool, err error) {
	data = []json.RawMessage{}
	for ; k != nil; k, v = stepKV(c, forward) {
		raw, ok, err := item(k, v)
		if errors.Is(err, errPageEnd) {
			break
		}
		if err != nil {
			return nil, false, err
		}
		if !ok {
			continue
		}
		if len(data) == limit {
			hasMore = true
			break
		}
		data = append(data, raw)
	}
	if forward {
		slices.Reverse(data)
	}
	return data, hasMore, nil
}

func stepKV(c *bolt.Cursor, forward bool) ([]byte, []byte) {
	if forward {
		return c.Next()
	}
	return c.Prev()
}

// startByID places c where a page of a bucket keyed by ids in creation order starts: the key
// before starting_after, the key after ending_before, or the newest key. missing is a cursor
// id the bucket does not hold.
func startByID(c *bolt.Cursor, p pageParams) (k, v []byte, missing string) {
	at := func(id string) bool {
		k, _ := c.Seek([]byte(id))
		return bytes.Equal(k, []byte(id))
	}
	switch {
	case p.StartingAfter != "":
		if !at(p.StartingAfter) {
			return nil, nil, p.StartingAfter
		}
		k, v = c.Prev()
	case p.EndingBefore != "":
		if !at(p.EndingBefore) {
			return nil, nil, p.EndingBefore
		}
		k, v = c.Next()
	default:
		k, v = c.Last()
	}
	return k, v, ""
}

// missingError is a list parameter naming an object that does not exist: Stripe's 400
// resource_missing.
type missingError struct{ param, object, id string }

func (e *missingError) Error() string { return fmt.Sprintf("No such %s: '%s'", e.object, e.id) }

// writeList answers a list or search route: 400 for a *missingError, a logged 500 (as op) for
// any other error, else v.
func (s *Simulator) writeList(w http.ResponseWriter, op string, v any, err error) {
	var miss *missingError
	switch {
	case errors.As(err, &miss):
		writeAPIError(w, http.StatusBadRequest, resourceMissing(miss.param, miss.object, miss.id))
	case err != nil:
		s.log.Error(op, "err", err)
		writeInternal(w)
	default:
		writeResponse(w, response{status: http.StatusOK, body: jsonBody(v)})
	}
}
