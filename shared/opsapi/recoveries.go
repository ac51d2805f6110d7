package opsapi

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/runtwice/twice/shared/payments"
)

// Recoveries reads the stored state of payment recoveries (payments.Recovery): the running
// ones for the console's list, and one payment's for its page.
type Recoveries interface {
	Running(ctx context.Context, limit int, cursor string) ([]payments.Recovery, string, error)
	Recovery(ctx context.Context, paymentID string) (payments.Recovery, error)
	// Card says what the network caps still allow on the payment's card at now (nil when its
	// card is not known).
	Card(ctx context.Context, paymentID string, now time.Time) (*payments.CardView, error)
}

var _ Recoveries = StorePayments{}

// Running implements Recoveries.
func (s StorePayments) Running(ctx context.Context, limit int, cursor string) ([]payments.Recovery, string, error) {
	return payments.ListRunningRecoveries(ctx, s.Store, limit, cursor)
}

// Recovery implements Recoveries; payments.ErrNotFound when the payment never had one.
func (s StorePayments) Recovery(ctx context.Context, paymentID string) (payments.Recovery, error) {
	return payments.GetRecovery(ctx, s.Store, paymentID)
}

// Card implements Recoveries.
func (s StorePayments) Card(ctx context.Context, paymentID string, now time.Time) (*payments.CardView, error) {
	p, err := payments.Get(ctx, s.Store, paymentID)
	if err != nil || p.Card == nil {
		return nil, err
	}
	return payments.CardViewOf(ctx, s.Store, *p.Card, now)
}

// recoveriesPage is one page of running recoveries, soonest next attempt first.
type recoveriesPage struct {
	Recoveries []payments.Recovery `json:"recoveries"`
	Cursor     string              `json:"cursor,omitempty"`
}

const maxRecoveriesPage = 100

func (h *Handler) runningRecoveries(r *http.Request) (recoveriesPage, error) {
	if h.Recoveries == nil {
		return recoveriesPage{}, errNotConfigured
	}
	limit := 50
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxRecoveriesPage {
			return recoveriesPage{}, &FieldError{Field: "limit", Reason: "must be 1-100"}
		}
		limit = n
	}
	cursor := r.URL.Query().Get("cursor")
	if len(cursor) > 2048 {
		return recoveriesPage{}, &FieldError{Field: "cursor", Reason: "too long"}
	}
	rs, next, err := h.Recoveries.Running(r.Context(), limit, cursor)
	if err != nil {
		return recoveriesPage{}, err
	}
	for i := range rs {
		rs[i].Resume = "" // the wait's timer is the state machine's business
	}
	return recoveriesPage{Recoveries: rs, Cursor: next}, nil
}

// recoveriesAPI serves GET /ops/recoveries: the running recoveries as JSON.
func (h *Handler) recoveriesAPI(w http.ResponseWriter, r *http.Request, _ string) {
	p, err := h.runningRecoveries(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

// recoveriesPageHandler serves the console's /ops/running: the running recoveries.
func (h *Handler) recoveriesPageHandler(w http.ResponseWriter, r *http.Request, s session) {
	p, err := h.runningRecoveries(r)
	if err != nil {
		status, detail := httpStatus(err)
		if errors.Is(err, errNotConfigured) {
			status, detail = http.StatusNotFound, "Recoveries are not configured."
		} else if status == http.StatusInternalServerError {
			h.log().ErrorContext(r.Context(), "console recoveries", "err", err)
		}
		h.render(w, status, errorView(view{Title: http.StatusText(status), Session: s, Error: detail}))
		return
	}
	h.render(w, http.StatusOK, recoveriesView(view{Title: "Running recoveries", Session: s}, p))
}

// paymentRecovery is the payment page's recovery, if it has one.
func (h *Handler) paymentRecovery(ctx context.Context, id string) (*payments.Recovery, error) {
	if h.Recoveries == nil {
		return nil, nil
	}
	rec, err := h.Recoveries.Recovery(ctx, id)
	if errors.Is(err, payments.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &rec, nil
}

// paymentCard is the payment page's card allowance, if its card is known.
func (h *Handler) paymentCard(ctx context.Context, id string) (*payments.CardView, error) {
	if h.Recoveries == nil {
		return nil, nil
	}
	c, err := h.Recoveries.Card(ctx, id, h.now())
	if errors.Is(err, payments.ErrNotFound) {
		return nil, nil
	}
	return c, err
}
