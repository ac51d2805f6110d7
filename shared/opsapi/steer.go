package opsapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"unicode/utf8"

	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/problem"
	"github.com/runtwice/twice/shared/recovery"
)

// RecoverySteerer steers a running recovery (recovery.Steerer).
type RecoverySteerer interface {
	Steer(ctx context.Context, s recovery.Steer) (payments.Recovery, error)
}

var _ RecoverySteerer = (*recovery.Steerer)(nil)

// steerActions maps the API's and the console's action names to the recovery's.
var steerActions = map[string]string{"charge-now": recovery.ActionChargeNow, "stop": recovery.ActionStop}

const maxSteerNote = 500

func (h *Handler) doSteer(ctx context.Context, paymentID, action, actor, note string) (payments.Recovery, error) {
	act, ok := steerActions[action]
	if !ok {
		return payments.Recovery{}, &FieldError{Field: "action", Reason: "must be charge-now or stop"}
	}
	if !validID(paymentID) {
		return payments.Recovery{}, &FieldError{Field: "id", Reason: "not a payment id"}
	}
	if len(note) > maxSteerNote || !utf8.ValidString(note) {
		return payments.Recovery{}, &FieldError{Field: "note", Reason: "at most 500 bytes of UTF-8"}
	}
	rec, err := h.Steer.Steer(ctx, recovery.Steer{PaymentID: paymentID, Action: act, Reason: recovery.ReasonOperator,
		Actor: actor, Note: note})
	if err == nil {
		h.log().InfoContext(ctx, "operator steered a recovery", "payment_id", paymentID, "action", act, "actor", actor)
	}
	return rec, err
}

// steerAPI serves POST /ops/recoveries/{id}/{action}: charge-now or stop, with an optional
// JSON body {"note": "..."}.
func (h *Handler) steerAPI(w http.ResponseWriter, r *http.Request, actor string) {
	var body struct {
		Note string `json:"note"`
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		problem.Write(w, problem.New(problem.BodyTooLarge, "The body is too large."))
		return
	}
	if len(b) > 0 {
		if err := json.Unmarshal(b, &body); err != nil {
			problem.Write(w, problem.New(problem.MalformedRequest, "The body must be a JSON object with an optional note."))
			return
		}
	}
	rec, err := h.doSteer(r.Context(), r.PathValue("id"), r.PathValue("action"), actor, body.Note)
	if errors.Is(err, recovery.ErrNotRunning) {
		problem.Write(w, problem.New(problem.NoRunningRecovery, "This payment has no running recovery to steer."))
		return
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	rec.Resume = ""
	writeJSON(w, http.StatusAccepted, rec)
}

// steerForm serves the console's charge-now and stop buttons on a payment's page.
func (h *Handler) steerForm(w http.ResponseWriter, r *http.Request, s session) {
	id := r.PathValue("id")
	if r.PathValue("action") == "charge-now" && !confirmed(r) {
		h.confirmChargeNow(w, r, s, id)
		return
	}
	_, err := h.doSteer(r.Context(), id, r.PathValue("action"), s.Actor, r.PostForm.Get("note"))
	done := "steered"
	switch {
	case errors.Is(err, recovery.ErrNotRunning):
		done = "not-running"
	case err != nil:
		status, detail := httpStatus(err)
		if status == http.StatusInternalServerError {
			h.log().ErrorContext(r.Context(), "console steer", "err", err)
		}
		h.render(w, status, errorView(view{Title: http.StatusText(status), Session: s, Error: detail}))
		return
	}
	http.Redirect(w, r, timelineLink(id)+"?done="+url.QueryEscape(done), http.StatusSeeOther)
}

// confirmChargeNow shows what "Charge now" will do before it is sent: which payment, how
// much, on which card.
func (h *Handler) confirmChargeNow(w http.ResponseWriter, r *http.Request, s session, id string) {
	if !validID(id) || h.Payments == nil {
		h.render(w, http.StatusNotFound, errorView(view{Title: "Not found", Session: s, Error: "No such payment."}))
		return
	}
	p, err := h.Payments.Payment(r.Context(), id)
	if err != nil {
		status, detail := httpStatus(err)
		if errors.Is(err, ErrNoPayment) {
			status, detail = http.StatusNotFound, "No such payment."
		}
		h.render(w, status, errorView(view{Title: http.StatusText(status), Session: s, Error: detail}))
		return
	}
	on := ""
	if c := cardText(p.CardBrand, p.CardLast4); c != "" {
		on = " on " + c
	}
	d := confirmData{Heading: fmt.Sprintf("Charge %s now?", Money(p.Amount, p.Currency)),
		Lines: []string{
			fmt.Sprintf("Payment %s of %s: the recovery stops waiting and charges %s%s within a minute, once, within the card networks' caps.", p.ID, p.Customer, Money(p.Amount, p.Currency), on),
			"If the caps forbid a charge now, nothing is charged and the payment's page says when the card may next be charged.",
		},
		Action: timelineLink(id) + "/recovery/charge-now", Fields: [][2]string{{"note", r.PostForm.Get("note")}},
		Button: "Charge " + Money(p.Amount, p.Currency) + " now", Cancel: timelineLink(id)}
	h.render(w, http.StatusOK, confirmView(view{Title: "Confirm charge now", Session: s}, d))
}
