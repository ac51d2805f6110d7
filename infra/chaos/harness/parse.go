package harness

import (
	"encoding/json"
	"errors"
	"fmt"
)

// ErrBadPage is returned for a list page of the simulator that does not parse.
var ErrBadPage = errors.New("chaos: malformed PaymentIntent list page")

// paymentID reads the id of a payment from an API answer ("" when there is none).
func paymentID(body string) string {
	var v struct {
		ID string `json:"id"`
	}
	if json.Unmarshal([]byte(body), &v) != nil {
		return ""
	}
	return v.ID
}

// statusOf reads the status of a payment from an API answer ("" when there is none).
func statusOf(body string) string {
	var v struct {
		Status string `json:"status"`
	}
	if json.Unmarshal([]byte(body), &v) != nil {
		return ""
	}
	return v.Status
}

// Intent is one PaymentIntent as the simulator holds it.
type Intent struct {
	ID        string `json:"id"`
	PaymentID string `json:"payment_id"` // metadata twice_payment_id
	Status    string `json:"status"`     // Stripe's status
	// AmountReceived is what the provider captured.
	AmountReceived int64 `json:"amount_received"`
	// Refunded is what the provider's pending and succeeded refunds of it add up to (Run
	// sets it from the refund list; 0 when unread).
	Refunded int64 `json:"refunded,omitempty"`
}

// parseIntentPage reads one page of GET /v1/payment_intents.
func parseIntentPage(b []byte) (intents []Intent, hasMore bool, err error) {
	var page struct {
		Object  string `json:"object"`
		HasMore bool   `json:"has_more"`
		Data    []struct {
			ID             string            `json:"id"`
			Status         string            `json:"status"`
			AmountReceived int64             `json:"amount_received"`
			Metadata       map[string]string `json:"metadata"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &page); err != nil {
		return nil, false, fmt.Errorf("%w: %v", ErrBadPage, err)
	}
	if page.Object != "list" {
		return nil, false, fmt.Errorf("%w: object %q", ErrBadPage, page.Object)
	}
	for _, d := range page.Data {
		if d.ID == "" {
			return nil, false, fmt.Errorf("%w: an intent without id", ErrBadPage)
		}
		intents = append(intents, Intent{ID: d.ID, PaymentID: d.Metadata["twice_payment_id"], Status: d.Status, AmountReceived: d.AmountReceived})
	}
	if page.HasMore && len(intents) == 0 {
		return nil, false, fmt.Errorf("%w: has_more on an empty page", ErrBadPage)
	}
	return intents, page.HasMore, nil
}

// LocalStatus maps a Stripe PaymentIntent status to the status twice shows for it.
func LocalStatus(stripeStatus string) string {
	switch stripeStatus {
	case "succeeded":
		return "succeeded"
	case "requires_payment_method":
		return "declined" // a confirmed intent back in requires_payment_method was declined
	case "processing":
		return "processing"
	case "canceled":
		return "canceled"
	case "requires_capture", "requires_action":
		return stripeStatus
	case "requires_confirmation":
		return "requires_action" // as the stack maps it: it waits on the customer's side
	default:
		return "pending"
	}
}
