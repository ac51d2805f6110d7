package payments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/runtwice/twice/shared/idempotency"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/store"
)

// Table holds one item per payment, keyed by payment id, indexed by creation day for
// reconciliation.
const Table = "payments"

// Payment is the stored record of one payment.
type Payment struct {
	ID                string            `json:"id"`
	Scope             string            `json:"scope"`
	IdempotencyKey    string            `json:"idempotency_key"`
	ProviderKey       string            `json:"provider_key"`
	Status            string            `json:"status"`
	Amount            int64             `json:"amount"`
	Currency          string            `json:"currency"`
	Customer          string            `json:"customer"`
	PaymentMethod     string            `json:"payment_method"`
	Invoice           string            `json:"invoice,omitempty"`
	Description       string            `json:"description,omitempty"`
	Metadata          map[string]string `json:"metadata,omitempty"`
	ProviderPaymentID string            `json:"provider_payment_id,omitempty"`
	// LatestCharge is the provider's id of the payment's latest charge (Stripe: ch_...): a
	// dispute names the charge, and sometimes only the charge.
	LatestCharge string            `json:"latest_charge,omitempty"`
	Decline      *provider.Decline `json:"decline,omitempty"`
	DeclineClass string            `json:"decline_class,omitempty"`
	// Card is the card of the latest attempt the provider named one for (a decline does).
	Card      *CardRef  `json:"card,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// Version orders changes: an older webhook never overwrites a newer state.
	Version int64 `json:"version"`
	// AmountRefunded is what the provider has refunded so far (minor units); see Refund.
	AmountRefunded int64 `json:"amount_refunded,omitempty"`
	// Dispute is the latest state of a dispute of the payment's charge, if any.
	Dispute *Dispute `json:"dispute,omitempty"`
	// OffSession marks a merchant-initiated payment (the customer is absent); CaptureMethod
	// is CaptureManual for an authorization captured later. Both are the request's.
	OffSession    bool   `json:"off_session,omitempty"`
	CaptureMethod string `json:"capture_method,omitempty"`
	// NextAction is what the customer must do, while requires_action. The client secret that
	// goes with it is never stored here: only the create's stored answer carries it.
	NextAction *NextAction `json:"next_action,omitempty"`
	// AmountCapturable and CaptureBefore describe the hold, while requires_capture.
	AmountCapturable int64     `json:"amount_capturable,omitempty"`
	CaptureBefore    time.Time `json:"capture_before,omitzero"`
	// AmountReceived is what a capture took, when less than Amount was captured.
	AmountReceived int64 `json:"amount_received,omitempty"`
	// CancellationReason is why a canceled payment was canceled (the provider's words:
	// requested_by_customer, abandoned, ...).
	CancellationReason string `json:"cancellation_reason,omitempty"`
}

// NextAction is what the customer must do for a payment in requires_action: Type is the
// provider's (use_stripe_sdk: the browser's Stripe.js completes it with the client secret;
// redirect_to_url: send the customer to RedirectURL).
type NextAction struct {
	Type        string `json:"type"`
	RedirectURL string `json:"redirect_url,omitempty"`
}

// CaptureManual is the capture method of an authorization captured later.
const CaptureManual = "manual"

// View is the API's shape of a payment.
type View struct {
	ID                string  `json:"id"`
	Status            string  `json:"status"`
	Amount            int64   `json:"amount"`
	Currency          string  `json:"currency"`
	Customer          string  `json:"customer"`
	ProviderPaymentID *string `json:"provider_payment_id"`
	DeclineCode       *string `json:"decline_code"`
	DeclineClass      *string `json:"decline_class"`
	CreatedAt         string  `json:"created_at"`
	// ClientSecret is in the answer to the POST that created a payment in requires_action,
	// and in its replays, never elsewhere: it is a credential for the customer's browser.
	ClientSecret *string     `json:"client_secret,omitempty"`
	NextAction   *NextAction `json:"next_action,omitempty"`
	// CaptureMethod is "manual" for an authorization captured later (omitted: automatic);
	// AmountCapturable and CaptureBefore describe its hold while it is requires_capture.
	CaptureMethod      string  `json:"capture_method,omitempty"`
	AmountCapturable   int64   `json:"amount_capturable,omitempty"`
	CaptureBefore      *string `json:"capture_before,omitempty"`
	AmountReceived     int64   `json:"amount_received,omitempty"`
	CancellationReason string  `json:"cancellation_reason,omitempty"`
	// Recovery and Card are read-only additions of GET /payments/{id} (never in a POST answer,
	// so a replay stays byte for byte the first answer): the payment's recovery while it has
	// one, and what the network caps still allow on its card.
	Recovery *RecoveryView `json:"recovery,omitempty"`
	Card     *CardView     `json:"card,omitempty"`
	// AmountRefunded and Dispute appear once a refund or a dispute exists (omitted before, so
	// the shape of a payment without either is unchanged).
	AmountRefunded int64    `json:"amount_refunded,omitempty"`
	Dispute        *Dispute `json:"dispute,omitempty"`
	// Refunds lists the payment's refunds, oldest first (GET only, once one exists).
	Refunds []RefundView `json:"refunds,omitempty"`
}

// View returns the API shape.
func (p Payment) View() View {
	v := View{ID: p.ID, Status: p.Status, Amount: p.Amount, Currency: p.Currency, Customer: p.Customer,
		ProviderPaymentID: nonEmpty(p.ProviderPaymentID), DeclineClass: nonEmpty(p.DeclineClass),
		CreatedAt: p.CreatedAt.UTC().Format(time.RFC3339), AmountRefunded: p.AmountRefunded, Dispute: p.Dispute}
	if p.Decline != nil {
		v.DeclineCode = nonEmpty(p.Decline.Code)
	}
	v.NextAction, v.CaptureMethod, v.AmountCapturable = p.NextAction, p.CaptureMethod, p.AmountCapturable
	v.AmountReceived, v.CancellationReason = p.AmountReceived, p.CancellationReason
	if !p.CaptureBefore.IsZero() {
		v.CaptureBefore = nonEmpty(p.CaptureBefore.UTC().Format(time.RFC3339))
	}
	return v
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// PaymentID derives the payment id for (scope, key): the same request names the same payment
// on every retry, so a retry after a crash finds the payment the first try recorded.
func PaymentID(scope, key string) string {
	return "pay_" + idempotency.Derive("payment", scope, key)[:24]
}

// DayShards is how many index partitions share one day's payments. Every write of a payment
// rewrites its index entry, so one partition per day would take every payment's writes; spread
// over DayShards, each stays under DynamoDB's 1,000 write units a second per index partition
// at 10,000 payments a second (docs/capacity.md).
const DayShards = 64

// DayIndex is the index partitions of the payments created on t's UTC day, sorted by creation
// time. Reconciliation walks the days its window covers.
func DayIndex(t time.Time) store.Shards {
	return store.Shards{Base: "day#" + t.UTC().Format("2006-01-02"), N: DayShards}
}

// Item returns the store item for p.
func (p Payment) Item() (store.Item, error) {
	doc, err := json.Marshal(p)
	if err != nil {
		return store.Item{}, err
	}
	return store.Item{PK: p.ID, Doc: doc, Version: p.Version,
		IndexPK: DayIndex(p.CreatedAt).Of(p.ID), IndexSK: p.CreatedAt.UTC().Format(time.RFC3339Nano) + "#" + p.ID}, nil
}

// Put returns the write that stores p if it is newer than what is stored.
func (p Payment) Put() (store.Write, error) {
	it, err := p.Item()
	if err != nil {
		return store.Write{}, err
	}
	return store.Write{Table: Table, Put: &it, Cond: store.Cond{Kind: store.VersionBelow, Version: p.Version}}, nil
}

// aliasPrefix keys the item that maps a provider payment id to ours, for events that carry only
// the provider's id (charge.refunded).
const aliasPrefix = "provider#"

// AliasWrite maps a provider payment id to our payment id.
func AliasWrite(providerID, paymentID string) store.Write {
	doc, _ := json.Marshal(map[string]string{"payment_id": paymentID})
	return store.Write{Table: Table, Put: &store.Item{PK: aliasPrefix + providerID, Doc: doc}}
}

// AliasWrites are the writes that let a provider's names find p: its provider payment id and
// the id of its latest charge, when known.
func AliasWrites(p Payment) []store.Write {
	var ws []store.Write
	if p.ProviderPaymentID != "" {
		ws = append(ws, AliasWrite(p.ProviderPaymentID, p.ID))
	}
	if p.LatestCharge != "" {
		ws = append(ws, AliasWrite(p.LatestCharge, p.ID))
	}
	return ws
}

// ByProviderID finds our payment id for a provider payment id (or a charge id: AliasWrites).
func ByProviderID(ctx context.Context, s store.Store, providerID string) (string, error) {
	it, err := s.Get(ctx, Table, aliasPrefix+providerID, "")
	if errors.Is(err, store.ErrNotFound) {
		return "", ErrNotFound
	}
	if err != nil {
		return "", err
	}
	var a struct {
		PaymentID string `json:"payment_id"`
	}
	if err := json.Unmarshal(it.Doc, &a); err != nil || a.PaymentID == "" {
		return "", fmt.Errorf("payments: alias for %s: %w", providerID, ErrNotFound)
	}
	return a.PaymentID, nil
}

// ErrNotFound means no payment has the id (in the caller's scope).
var ErrNotFound = errors.New("payments: not found")

// Get reads a payment.
func Get(ctx context.Context, s store.Store, id string) (Payment, error) {
	it, err := s.Get(ctx, Table, id, "")
	if errors.Is(err, store.ErrNotFound) {
		return Payment{}, ErrNotFound
	}
	if err != nil {
		return Payment{}, err
	}
	return Decode(it)
}

// Decode reads a payment from its item.
func Decode(it store.Item) (Payment, error) {
	var p Payment
	if err := json.Unmarshal(it.Doc, &p); err != nil {
		return Payment{}, fmt.Errorf("payments: stored payment %s: %w", it.PK, err)
	}
	p.Version = it.Version
	return p, nil
}
