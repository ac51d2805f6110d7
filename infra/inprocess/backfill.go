package inprocess

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/runtwice/twice/shared/backfill"
	"github.com/runtwice/twice/shared/problem"
)

// backfillHandler is POST /ops/backfill (operator token): one backfill pass now, body a
// backfill.Request ({} is the scheduled pass from the checkpoint; {"since":RFC3339} replays
// from then; {"undelivered_only":true} keeps the events the provider could not deliver). The
// answer is the pass's report.
func (s *Stack) backfillHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.operator(w, r) {
			return
		}
		raw, err := io.ReadAll(io.LimitReader(r.Body, 8<<10))
		if err != nil {
			problem.Error(w, http.StatusBadRequest, "The body could not be read.")
			return
		}
		req, err := backfill.ParseRequest(raw)
		if err != nil {
			problem.Error(w, http.StatusBadRequest, `The body must be {} or {"since":"RFC 3339 time","undelivered_only":bool}.`)
			return
		}
		rep, err := s.backfill.Run(r.Context(), req)
		if errors.Is(err, backfill.ErrBadRequest) {
			problem.Error(w, http.StatusBadRequest, "The request names a time out of range.")
			return
		}
		if err != nil {
			s.log.Error("backfill failed", "error", err)
			problem.Error(w, http.StatusBadGateway, "The backfill could not complete; the provider or the store failed. Try again.")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(rep)
	})
}
