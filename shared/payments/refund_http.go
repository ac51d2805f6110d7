package payments

import (
	"context"
	"errors"
	"net/http"

	"github.com/runtwice/twice/shared/idempotency"
	"github.com/runtwice/twice/shared/problem"
)

// serveRefund is POST /payments/{id}/refunds, in the straight line of serveCreate: the key and
// the body are read once, the body parsed and fingerprinted with the payment it refunds, the
// refund runs under the key (Keeper.Run) and the outcome is written by the one mapping of
// outcomes to HTTP. An invalid body or an unknown payment is answered before the key is
// touched, so the key stays free for a corrected request.
func (s *Service) serveRefund(w http.ResponseWriter, r *http.Request, scope string) {
	key, body, ok := idempotency.ReadRequest(w, r, MaxRefundBody)
	if !ok {
		return
	}
	req, err := ParseRefundRequest(body)
	if err != nil {
		problem.Write(w, RefundRequestProblem(err))
		return
	}
	id := r.PathValue("id")
	p, err := Get(r.Context(), s.Store, id)
	if errors.Is(err, ErrNotFound) || (err == nil && p.Scope != scope) {
		problem.Write(w, problem.New(problem.NotFound, "No payment has this id."))
		return
	}
	if err != nil {
		s.log().ErrorContext(r.Context(), "read payment", "error", err)
		problem.Write(w, problem.New(problem.Internal, "The payment could not be read; retry."))
		return
	}
	out, err := s.Keeper.Run(r.Context(), scope, key, req.fingerprint(id), func(ctx context.Context, l *idempotency.Lease) (idempotency.Result, error) {
		return s.refund(ctx, scope, key, id, req, l)
	})
	s.Keeper.WriteOutcome(w, r, out, err)
}

// addRefunds adds the payment's refunds to its view (GET only: a POST answer never carries
// them, so a replay stays byte for byte the first answer).
func (s *Service) addRefunds(ctx context.Context, v *View, p Payment) error {
	l, err := GetRefunds(ctx, s.Store, p.ID)
	if err != nil || len(l.Refunds) == 0 {
		return err
	}
	v.Refunds = l.RefundViews()
	return nil
}
