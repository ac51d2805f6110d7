package stripesim

import (
	"bytes"
	"encoding/json"
	"net/http"
	"regexp"
	"time"

	bolt "go.etcd.io/bbolt"
)

// searchResponse is Stripe's search result envelope.
type searchResponse struct {
	Object   string            `json:"object"`
	URL      string            `json:"url"`
	HasMore  bool              `json:"has_more"`
	Data     []json.RawMessage `json:"data"`
	NextPage *string           `json:"next_page"`
}

// searchQuery is the one clause of Stripe's search query language the adapter sends:
// metadata['key']:'value' (an exact match). Anything else is refused as Stripe refuses a
// query it cannot parse.
var searchQuery = regexp.MustCompile(`^metadata\['([A-Za-z0-9_\-]{1,40})'\]:'([A-Za-z0-9_\-]{1,255})'$`)

// handleSearch serves GET /v1/payment_intents/search?query=...&limit=N, oldest match first,
// one page: the simulator's index is its own store, so unlike Stripe's it never lags.
func (s *Simulator) handleSearch(w http.ResponseWriter, r *http.Request) {
	form, ok := parseRequest(w, r)
	if !ok {
		return
	}
	limit := 10
	var m []string
	for k, vs := range form {
		switch k {
		case "query":
			m = searchQuery.FindStringSubmatch(last(vs))
		case "limit":
			n, perr := parseLimit(last(vs))
			if perr != nil {
				writeParamError(w, perr)
				return
			}
			limit = n
		case "page":
		default:
			writeParamError(w, unknownParam(k))
			return
		}
	}
	if m == nil {
		writeParamError(w, &ParamError{Code: "parameter_invalid_string", Param: "query",
			Message: "The simulator searches only metadata['key']:'value'."})
		return
	}
	out := searchResponse{Object: "search_result", URL: "/v1/payment_intents/search", Data: []json.RawMessage{}}
	err := s.db.View(func(tx *bolt.Tx) error {
		pis := bucket(tx, bucketPIs)
		c := bucket(tx, bucketPIByTime).Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			raw := pis.Get(k[8:])
			var pi PaymentIntent
			if err := json.Unmarshal(raw, &pi); err != nil {
				return err
			}
			if pi.Metadata[m[1]] != m[2] {
				continue
			}
			if len(out.Data) == limit {
				out.HasMore = true
				break
			}
			out.Data = append(out.Data, bytes.Clone(raw))
		}
		return nil
	})
	s.writeList(w, "search payment intents", out, err)
}

// ExpireRequest is the body of POST /_sim/idempotency/expire.
type ExpireRequest struct {
	OlderThanS int64 `json:"older_than_s"`
}

// handleExpire forgets idempotency keys older than older_than_s seconds (0: every key), as
// Stripe forgets them after its retention: a create re-sent with a forgotten key creates anew.
func (s *Simulator) handleExpire(w http.ResponseWriter, r *http.Request) {
	var q ExpireRequest
	if err := decodeControl(r.Body, &q); err != nil {
		s.writeControlError(w, err)
		return
	}
	if q.OlderThanS < 0 || q.OlderThanS > int64(365*24*time.Hour/time.Second) {
		s.writeControlError(w, badControl("older_than_s must be within 0..31536000"))
		return
	}
	n, err := s.ExpireIdempotencyKeys(time.Duration(q.OlderThanS) * time.Second)
	if err != nil {
		s.writeControlError(w, err)
		return
	}
	s.log.Info("idempotency keys expired", "older_than_s", q.OlderThanS, "expired", n)
	writeJSON(w, http.StatusOK, map[string]any{"expired": n})
}
