package payments

import (
	"context"
	"fmt"
	"net/http"

	"github.com/runtwice/twice/shared/idempotency"
)

// serveRefund is POST /payments/{id}/refunds, in the straight line of serveCreate: the key and
// the body are read once, the body parsed and fingerprinted with the payment it refunds, and
// the refund runs under the key (Keeper.Run). An invalid body or an unknown payment is
// answered before the key is touched, so the key stays free for a corrected request.
func (s *Service) serveRefund(r *http.Request, scope string) (reply, error) {
	key, body, err := readRequest(r)
	if err != nil {
		return reply{}, err
	}
	req, err := ParseRefundRequest(body)
	if err != nil {
		return reply{}, fmt.Errorf("%w: %w", errBadRefund, err)
	}
	id := r.PathValue("id")
	if _, err := s.payment(r.Context(), id, scope); err != nil {
		return reply{}, err
	}
	out, err := s.Keeper.Run(r.Context(), scope, key, req.fingerprint(id), func(ctx context.Context, l *idempotency.Lease) (idempotency.Result, error) {
		return s.refund(ctx, scope, key, id, req, l)
	})
	return outcome(key, out, err)
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
