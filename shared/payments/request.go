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
}

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
	if reason := checkMetadata(req.Metadata); reason != "" {
		bad["metadata"] = reason
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

func checkMetadata(m map[string]string) string {
	if len(m) > maxMetadataKeys {
		return fmt.Sprintf("may have at most %d keys", maxMetadataKeys)
	}
	for k, v := range m {
		switch {
		case k == "" || len(k) > maxMetadataKey:
			return fmt.Sprintf("keys must be 1 to %d characters", maxMetadataKey)
		case strings.HasPrefix(k, metadataPrefix):
			return "keys starting with " + metadataPrefix + " are reserved"
		case len(v) > maxMetadataValue:
			return fmt.Sprintf("values must be at most %d characters", maxMetadataValue)
		}
	}
	return ""
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
