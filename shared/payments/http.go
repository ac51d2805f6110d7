package payments

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/runtwice/twice/shared/idempotency"
	"github.com/runtwice/twice/shared/problem"
)

// MaxBody is the largest POST /payments body accepted.
const MaxBody = 64 << 10

// Handler serves POST /payments and GET /payments/{id}. scope names the caller of a request
// (the API Gateway authorizer's principal; "local" locally): keys and payments never cross
// scopes.
func (s *Service) Handler(scope func(*http.Request) string) http.Handler {
	mux := http.NewServeMux()
	create := s.Keeper.Middleware(idempotency.MiddlewareConfig{Scope: scope, MaxBody: MaxBody})(s.createHandler(scope))
	// Recovery of a decline and resolution of an unknown outcome are outbox messages committed
	// with the answer; nothing runs after the commit.
	mux.Handle("POST /payments", create)
	mux.HandleFunc("GET /payments/{id}", func(w http.ResponseWriter, r *http.Request) {
		p, err := Get(r.Context(), s.Store, r.PathValue("id"))
		if errors.Is(err, ErrNotFound) || (err == nil && p.Scope != scope(r)) {
			problem.Error(w, http.StatusNotFound, "No payment has this id.")
			return
		}
		if err != nil {
			s.log().ErrorContext(r.Context(), "read payment", "error", err)
			problem.Error(w, http.StatusInternalServerError, "The payment could not be read; retry.")
			return
		}
		v := p.View()
		if err := s.addRecovery(r.Context(), &v, p); err != nil {
			s.log().ErrorContext(r.Context(), "read payment recovery", "payment_id", p.ID, "error", err)
			problem.Error(w, http.StatusInternalServerError, "The payment could not be read; retry.")
			return
		}
		writeJSON(w, http.StatusOK, v)
	})
	return mux
}

func (s *Service) createHandler(scope func(*http.Request) string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body) // the middleware has read and capped it already
		req, err := ParseCreateRequest(body)
		if err != nil {
			// Validation failures are not stored: the key stays free for a corrected request.
			idempotency.NotFinal(r.Context())
			p := problem.New(http.StatusBadRequest, "The request body is not a valid payment request.")
			var invalid *InvalidError
			if errors.As(err, &invalid) {
				p.Extra = map[string]any{"invalid_fields": invalid.Fields}
			} else {
				p.Detail = err.Error() // ErrMalformed's text is written for callers
			}
			problem.Write(w, p)
			return
		}
		l, _ := idempotency.LeaseOf(r.Context())
		res, err := s.create(r.Context(), scope(r), r.Header.Get(idempotency.HeaderKey), req, l)
		if err != nil {
			idempotency.NotFinal(r.Context())
			s.log().ErrorContext(r.Context(), "create payment", "error", err)
			problem.Error(w, http.StatusInternalServerError, "The payment could not be processed; it is safe to retry with the same Idempotency-Key.")
			return
		}
		switch {
		case res.Pending:
			idempotency.MarkPending(r.Context())
		case !res.Final:
			idempotency.NotFinal(r.Context())
		}
		idempotency.Stage(r.Context(), res.Effects...)
		idempotency.StageIfNewer(r.Context(), res.IfNewer...)
		for k, v := range res.Response.Header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(res.Response.Status)
		_, _ = w.Write(res.Response.Body)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		problem.Error(w, http.StatusInternalServerError, "The response could not be encoded.")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// addRecovery adds the payment's recovery and its card's allowance to its view.
func (s *Service) addRecovery(ctx context.Context, v *View, p Payment) error {
	rec, err := GetRecovery(ctx, s.Store, p.ID)
	switch {
	case err == nil:
		v.Recovery = rec.View()
	case !errors.Is(err, ErrNotFound):
		return err
	}
	if p.Card != nil {
		c, err := CardViewOf(ctx, s.Store, *p.Card, s.now())
		if err != nil {
			return err
		}
		v.Card = c
	}
	return nil
}
