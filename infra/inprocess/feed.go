package inprocess

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/runtwice/twice/shared/feed"
	"github.com/runtwice/twice/shared/problem"
)

// Limits of GET /events.
const (
	feedDefaultLimit = 100
	feedMaxLimit     = 1000
	feedDefaultWait  = 20 * time.Second
	feedMaxWait      = 25 * time.Second // under the request deadline
)

// feedPage is the body of GET /events.
type feedPage struct {
	Events []feed.Event `json:"events"`
	// Next is the cursor to pass as after= to continue (the last event's, or the one given
	// when nothing came).
	Next string `json:"next"`
}

// feedHandler is GET /events?after=CURSOR&limit=N&wait=S (operator token): the events after
// CURSOR (from the start without it), oldest first; when there are none yet it waits up to
// wait seconds (default 20, 0 answers at once) for the first (a long poll). A consumer stores
// next and resumes from it after any restart, its own or the stack's.
func (s *Stack) feedHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.operator(w, r) {
			return
		}
		q := r.URL.Query()
		after, err := feed.ParseCursor(q.Get("after"))
		if err != nil {
			problem.Error(w, http.StatusBadRequest, "after must be a cursor this feed returned (a decimal position).")
			return
		}
		limit, wait := feedDefaultLimit, feedDefaultWait
		if v := q.Get("limit"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > feedMaxLimit {
				problem.Error(w, http.StatusBadRequest, "limit must be within 1..1000.")
				return
			}
			limit = n
		}
		if v := q.Get("wait"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || time.Duration(n)*time.Second > feedMaxWait {
				problem.Error(w, http.StatusBadRequest, "wait must be within 0..25 seconds.")
				return
			}
			wait = time.Duration(n) * time.Second
		}
		evs, err := s.feed.Wait(r.Context(), after, limit, wait)
		if err != nil {
			s.log.Error("event feed read failed", "error", err)
			problem.Error(w, http.StatusInternalServerError, "The event feed could not be read; try again.")
			return
		}
		page := feedPage{Events: evs, Next: strconv.FormatInt(after, 10)}
		if n := len(evs); n > 0 {
			page.Next = evs[n-1].Cursor
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(page)
	})
}
