package declines

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// ErrInvalidDecline is the sentinel every parse failure wraps.
var ErrInvalidDecline = errors.New("declines: invalid decline")

// FieldError names the field of a decline document that was rejected and why.
type FieldError struct {
	Field   string
	Problem string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("declines: invalid decline: %s: %s", e.Field, e.Problem)
}

// Unwrap makes errors.Is(err, ErrInvalidDecline) true.
func (e *FieldError) Unwrap() error { return ErrInvalidDecline }

// MaxDocument caps a decline document; a real one is a few hundred bytes.
const MaxDocument = 4 << 10

// maxCode caps each code; the longest real one (mobile_device_authentication_required) is 37.
const maxCode = 64

// ParseDecline decodes a decline document (the JSON form of Decline, as it arrives in a
// webhook-derived message or a state machine input). Unknown members are ignored, as providers
// add fields; a code that is too long or holds anything but visible ASCII is rejected, so
// nothing odd reaches a log line or the console.
func ParseDecline(data []byte) (Decline, error) {
	if len(data) > MaxDocument {
		return Decline{}, &FieldError{Field: "document", Problem: "too large"}
	}
	var d Decline
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&d); err != nil {
		return Decline{}, &FieldError{Field: "document", Problem: "not a JSON decline object"}
	}
	if dec.More() {
		return Decline{}, &FieldError{Field: "document", Problem: "trailing data"}
	}
	return d, d.Validate()
}

// Validate reports the first field that is not a plausible code.
func (d Decline) Validate() error {
	fields := []struct{ name, value string }{
		{"code", d.Code},
		{"advice_code", d.AdviceCode},
		{"network_advice_code", d.NetworkAdviceCode},
		{"network_decline_code", d.NetworkDeclineCode},
		{"network", string(d.Network)},
	}
	for _, f := range fields {
		if len(f.value) > maxCode {
			return &FieldError{Field: f.name, Problem: "too long"}
		}
		for i := 0; i < len(f.value); i++ {
			if c := f.value[i]; c < 0x21 || c > 0x7e {
				return &FieldError{Field: f.name, Problem: "not visible ASCII"}
			}
		}
	}
	return nil
}
