package payments

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/currency"

	"github.com/runtwice/twice/shared/idempotency"
)

// CreateRequest is the body of POST /payments.
type CreateRequest struct {
	Amount        int64             `json:"amount"`
	Currency      string            `json:"currency"`
	Customer      string            `json:"customer"`
	PaymentMethod string            `json:"payment_method"`
	Invoice       string            `json:"invoice,omitempty"`
	Description   string            `json:"description,omitempty"`
	Metadata      map[string]string `json:"metadata,omitempty"`
	// OffSession marks a merchant-initiated charge (a renewal): the customer is absent, so a
	// payment that needs authentication is declined (authentication_required) instead of
	// waiting in requires_action.
	OffSession bool `json:"off_session,omitempty"`
	// CaptureMethod "manual" authorizes only: the payment waits in requires_capture for POST
	// /payments/{id}/capture or /cancel. "automatic" (or none) captures at once.
	CaptureMethod string `json:"capture_method,omitempty"`
}

// The capture methods a request may name.
const captureAutomatic = "automatic"

// Limits that mirror Stripe's, so a request we accept is one the provider accepts.
const (
	maxAmount        = 99_999_999 // Stripe's largest amount for most currencies, in minor units
	maxIDLen         = 255
	maxDescription   = 1000
	maxMetadataKeys  = 50
	maxMetadataKey   = 40
	maxMetadataValue = 500
	// metadataPrefix is reserved for what twice itself puts on the provider's object.
	metadataPrefix = "twice_"
)

// InvalidError is a request that cannot be processed; Fields maps each bad field to a reason a
// caller can act on.
type InvalidError struct {
	Fields map[string]string
}

func (e *InvalidError) Error() string {
	var parts []string
	for _, f := range e.Names() {
		parts = append(parts, f+": "+e.Fields[f])
	}
	return "payments: invalid request: " + strings.Join(parts, "; ")
}

// ErrMalformed is a body that is not a JSON object of the expected shape; the error is a
// *MalformedError.
var ErrMalformed = errors.New("payments: malformed request body")

// MalformedError says why a body is malformed, in a sentence written for the caller (it names
// a field, never a Go type).
type MalformedError struct {
	Reason string
}

func (e *MalformedError) Error() string { return ErrMalformed.Error() + ": " + e.Reason }

// Is makes errors.Is(err, ErrMalformed) true.
func (e *MalformedError) Is(target error) bool { return target == ErrMalformed }

// Names reports the fields that are invalid, sorted.
func (e *InvalidError) Names() []string { return slices.Sorted(maps.Keys(e.Fields)) }

// ParseCreateRequest decodes and validates a POST /payments body: unknown fields, wrong types
// and trailing data are malformed; values out of range are invalid with a reason per field.
func ParseCreateRequest(body []byte) (CreateRequest, error) {
	var req CreateRequest
	if name, dup := duplicateName(body); dup {
		// encoding/json keeps the last of two same names: {"amount":2000,...,"amount":1}
		// would charge 1. An ambiguous body is refused, never guessed at.
		return CreateRequest{}, &MalformedError{Reason: capReason(fmt.Sprintf("field %q appears more than once", name))}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return CreateRequest{}, &MalformedError{Reason: capReason(describeDecodeError(err))}
	}
	if _, err := dec.Token(); err != io.EOF {
		return CreateRequest{}, &MalformedError{Reason: "unexpected data after the JSON object"}
	}
	if !bytes.HasPrefix(bytes.TrimLeft(body, " \t\r\n"), []byte("{")) {
		return CreateRequest{}, &MalformedError{Reason: "the body must be a JSON object"}
	}
	bad := map[string]string{}
	if req.Amount <= 0 || req.Amount > maxAmount {
		bad["amount"] = fmt.Sprintf("must be a whole number of minor units from 1 to %d", maxAmount)
	}
	if !validCurrency(req.Currency) {
		bad["currency"] = "must be a lower-case ISO 4217 currency code, such as usd"
	}
	for name, v := range map[string]string{"customer": req.Customer, "payment_method": req.PaymentMethod} {
		if reason := checkID(v, true); reason != "" {
			bad[name] = reason
		}
	}
	if reason := checkID(req.Invoice, false); reason != "" {
		bad["invoice"] = reason
	}
	if len(req.Description) > maxDescription || !utf8.ValidString(req.Description) {
		bad["description"] = fmt.Sprintf("must be valid text of at most %d bytes", maxDescription)
	}
	if reason := checkMetadata(req.Metadata, req.Invoice != ""); reason != "" {
		bad["metadata"] = reason
	}
	switch req.CaptureMethod {
	case "", captureAutomatic:
		req.CaptureMethod = "" // one spelling of the default
	case CaptureManual:
	default:
		bad["capture_method"] = `must be "automatic" or "manual"`
	}
	if len(bad) > 0 {
		return CreateRequest{}, &InvalidError{Fields: bad}
	}
	return req, nil
}

func validCurrency(c string) bool {
	if len(c) != 3 || strings.ToLower(c) != c {
		return false
	}
	u, err := currency.ParseISO(c)
	// XXX (no currency) and XTS (testing) parse but cannot be charged.
	return err == nil && u != currency.XXX && u != currency.XTS
}

func checkID(v string, required bool) string {
	switch {
	case v == "" && required:
		return "is required"
	case len(v) > maxIDLen:
		return fmt.Sprintf("must be at most %d characters", maxIDLen)
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x21 || v[i] > 0x7e {
			return "must be visible ASCII characters without spaces"
		}
	}
	return ""
}

// checkMetadata holds metadata to what Stripe accepts once twice has added its own keys
// (MetaPaymentID and MetaScope always, MetaInvoice with an invoice): at most 50 keys in all,
// keys of at most 40 characters without square brackets (Stripe's form encoding reads
// "a[b]" as a nested parameter and refuses it).
func checkMetadata(m map[string]string, invoice bool) string {
	reserved := 2
	if invoice {
		reserved++
	}
	if len(m) > maxMetadataKeys-reserved {
		return fmt.Sprintf("may have at most %d keys (the provider allows %d, and twice adds %d of its own)", maxMetadataKeys-reserved, maxMetadataKeys, reserved)
	}
	for k, v := range m {
		switch {
		case k == "" || len(k) > maxMetadataKey:
			return fmt.Sprintf("keys must be 1 to %d characters", maxMetadataKey)
		case strings.ContainsAny(k, "[]"):
			return "keys may not contain square brackets (the provider refuses them)"
		case strings.HasPrefix(k, metadataPrefix):
			return "keys starting with " + metadataPrefix + " are reserved"
		case len(v) > maxMetadataValue:
			return fmt.Sprintf("values must be at most %d characters", maxMetadataValue)
		}
	}
	return ""
}

// duplicateName reports the first object member name that appears twice in one object, at
// any depth (a body that is not valid JSON reports none: the decoder says what is wrong). It
// walks encoding/json's tokens, so the payment functions link no second JSON library.
func duplicateName(body []byte) (string, bool) {
	type frame struct {
		obj  bool
		key  bool // an object's next string token is a name
		seen map[string]bool
	}
	var stack []*frame
	dec := json.NewDecoder(bytes.NewReader(body))
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				stack = append(stack, &frame{obj: d == '{', key: d == '{', seen: map[string]bool{}})
			default:
				stack = stack[:len(stack)-1]
				if len(stack) > 0 && stack[len(stack)-1].obj {
					stack[len(stack)-1].key = true // the closed value was a member's
				}
			}
			continue
		}
		if top == nil || !top.obj {
			continue
		}
		if top.key {
			name, _ := tok.(string)
			if top.seen[name] {
				return name, true
			}
			top.seen[name] = true
		}
		top.key = !top.key
	}
}

// FingerprintBody is the fingerprint of a POST /payments body under its key: its canonical
// JSON (idempotency.FingerprintJSON) with fields that only spell out the default left out
// (an empty or null metadata, "off_session": false, "capture_method": "automatic"), so that
// "metadata":{} and no metadata, the same request, are one fingerprint.
func FingerprintBody(body []byte) idempotency.Fingerprint {
	var obj map[string]json.RawMessage
	if json.Unmarshal(body, &obj) == nil {
		dropped := false
		for name, m := range obj {
			if isDefault(name, m) {
				delete(obj, name)
				dropped = true
			}
		}
		if dropped {
			if b, err := json.Marshal(obj); err == nil {
				body = b
			}
		}
	}
	fp, err := idempotency.FingerprintJSON(body)
	if err != nil { // ParseCreateRequest accepted it, so it is JSON; keep the guard all the same
		fp = idempotency.FingerprintBytes(body)
	}
	return fp
}

// isDefault reports whether a body's field only spells out what its absence means.
func isDefault(name string, raw json.RawMessage) bool {
	switch name {
	case "metadata", "off_session", "capture_method":
	default:
		return false // no default to leave out: not decoded
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return false
	}
	switch name {
	case "metadata":
		m, ok := v.(map[string]any)
		return v == nil || ok && len(m) == 0
	case "off_session":
		return v == nil || v == false
	case "capture_method":
		return v == nil || v == "" || v == captureAutomatic
	}
	return false
}

// capReason bounds a reason that quotes the caller's input (a field path inside metadata).
func capReason(r string) string {
	if len(r) <= 200 {
		return r
	}
	return strings.ToValidUTF8(r[:200], "") + "..."
}

// describeDecodeError turns encoding/json's errors into a sentence that names the field but
// not our Go types.
func describeDecodeError(err error) string {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		if typeErr.Field != "" {
			return fmt.Sprintf("field %q has the wrong type (got a JSON %s)", typeErr.Field, typeErr.Value)
		}
		return "the body must be a JSON object"
	case errors.As(err, &syntaxErr):
		return fmt.Sprintf("invalid JSON at byte %d", syntaxErr.Offset)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the body is empty or cut short"
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		// The name is the caller's: capped, as everything from outside is.
		name := strings.TrimPrefix(err.Error(), "json: unknown field ")
		if len(name) > 66 {
			name = name[:64] + `..."`
		}
		return "unknown field " + name
	}
	return "the body is not valid JSON"
}
