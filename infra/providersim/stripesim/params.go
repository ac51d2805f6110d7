package stripesim

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// ParamError is a request parameter Stripe would reject with 400 invalid_request_error.
// Its message is Stripe's wording and safe to return to a caller.
type ParamError struct {
	Code    string
	Param   string
	Message string
}

func (e *ParamError) Error() string { return e.Message }

func unknownParam(name string) *ParamError {
	return &ParamError{Code: "parameter_unknown", Param: name,
		Message: fmt.Sprintf("Received unknown parameter: %s", name)}
}

func missingParam(name string) *ParamError {
	return &ParamError{Code: "parameter_missing", Param: name,
		Message: fmt.Sprintf("Missing required param: %s.", name)}
}

// splitParam splits a bracketed form key such as metadata[order] or created[gte]
// into its base name and segments. ok is false for a malformed key.
func splitParam(key string) (base string, segs []string, ok bool) {
	i := strings.IndexByte(key, '[')
	if i < 0 {
		return key, nil, key != "" && !strings.ContainsRune(key, ']')
	}
	base, rest := key[:i], key[i:]
	if base == "" {
		return "", nil, false
	}
	for rest != "" {
		if rest[0] != '[' {
			return "", nil, false
		}
		j := strings.IndexByte(rest, ']')
		if j < 0 {
			return "", nil, false
		}
		seg := rest[1:j]
		if strings.ContainsRune(seg, '[') {
			return "", nil, false
		}
		segs = append(segs, seg)
		rest = rest[j+1:]
	}
	return base, segs, true
}

// last returns the last value sent for a key, as Stripe's form decoder keeps the last.
func last(vs []string) string {
	if len(vs) == 0 {
		return ""
	}
	return vs[len(vs)-1]
}

func parseBool(name, s string) (bool, *ParamError) {
	switch s {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, &ParamError{Code: "parameter_invalid_boolean", Param: name,
		Message: fmt.Sprintf("Invalid boolean: %s", s)}
}

func parseInt(name, s string) (int64, *ParamError) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, &ParamError{Code: "parameter_invalid_integer", Param: name,
			Message: fmt.Sprintf("Invalid integer: %s", s)}
	}
	return n, nil
}

// common holds what every PaymentIntent route may carry.
type common struct {
	Expand []string
}

// createParams are the accepted parameters of POST /v1/payment_intents.
type createParams struct {
	common
	Amount        int64
	Currency      string
	Customer      string
	PaymentMethod string
	Description   string
	ReceiptEmail  string
	CaptureMethod string
	Confirm       bool
	OffSession    bool
	ReturnURL     string
	Metadata      map[string]string
}

// confirmParams are the accepted parameters of POST /v1/payment_intents/{id}/confirm.
type confirmParams struct {
	common
	PaymentMethod string
	OffSession    bool
	ReturnURL     string
}

// listParams are the accepted parameters of GET /v1/payment_intents.
type listParams struct {
	common
	Limit         int
	StartingAfter string
	EndingBefore  string
	Customer      string
	Created       createdRange
}

// createdRange is an inclusive range of unix seconds; zero bounds are open.
type createdRange struct {
	GTE, LTE int64
	set      bool
}

func (c createdRange) contains(t int64) bool {
	if !c.set {
		return true
	}
	return t >= c.GTE && t <= c.LTE
}

// ignored are accepted and stored nowhere: they change nothing the simulator models.
var ignoredCreate = map[string]bool{
	"automatic_payment_methods": true, "confirmation_method": true, "payment_method_types": true,
	"payment_method_options": true, "mandate_data": true, "shipping": true,
	"setup_future_usage": true, "statement_descriptor": true, "statement_descriptor_suffix": true,
	"error_on_requires_action": true, "use_stripe_sdk": true, "transfer_group": true,
	"payment_method_configuration": true, "radar_options": true,
}

var ignoredConfirm = map[string]bool{
	"mandate_data": true, "payment_method_options": true, "payment_method_types": true,
	"setup_future_usage": true, "shipping": true, "error_on_requires_action": true, "use_stripe_sdk": true,
	"receipt_email": true, "capture_method": true, "radar_options": true,
}

// parseExpand accepts expand[]=x and expand[0]=x as stripe-go sends it.
func parseExpand(segs []string, vs []string, c *common) *ParamError {
	if len(segs) != 1 {
		return unknownParam("expand")
	}
	if segs[0] != "" {
		if _, err := strconv.Atoi(segs[0]); err != nil {
			return unknownParam("expand[" + segs[0] + "]")
		}
	}
	c.Expand = append(c.Expand, vs...)
	return nil
}

func parseOffSession(s string) (bool, *ParamError) {
	switch s {
	case "true", "one_off", "recurring":
		return true, nil
	case "false":
		return false, nil
	}
	return false, &ParamError{Code: "parameter_invalid_boolean", Param: "off_session",
		Message: fmt.Sprintf("Invalid boolean: %s", s)}
}

// Stripe's metadata limits.
const (
	maxMetadataKeys     = 50
	maxMetadataKeyLen   = 40
	maxMetadataValueLen = 500
	maxStringParam      = 5000
	maxAmount           = 99999999 // Stripe's eight-digit limit (999,999.99 in a two-decimal currency)
)

func parseCreate(v url.Values) (createParams, *ParamError) {
	var p createParams
	for key, vs := range v {
		base, segs, ok := splitParam(key)
		if !ok {
			return p, unknownParam(key)
		}
		val := last(vs)
		if len(val) > maxStringParam {
			return p, &ParamError{Code: "parameter_invalid_string", Param: key,
				Message: fmt.Sprintf("Invalid string: %s...; must be at most %d characters", val[:20], maxStringParam)}
		}
		if base == "expand" {
			if err := parseExpand(segs, vs, &p.common); err != nil {
				return p, err
			}
			continue
		}
		if base == "metadata" {
			if len(segs) != 1 || segs[0] == "" {
				return p, unknownParam(key)
			}
			if len(segs[0]) > maxMetadataKeyLen || len(val) > maxMetadataValueLen {
				return p, &ParamError{Code: "parameter_invalid_string", Param: key,
					Message: "Metadata keys can have up to 40 characters and values up to 500 characters."}
			}
			if p.Metadata == nil {
				p.Metadata = map[string]string{}
			}
			if val != "" { // an empty value unsets a key, as in Stripe.
				p.Metadata[segs[0]] = val
			}
			if len(p.Metadata) > maxMetadataKeys {
				return p, &ParamError{Code: "parameter_invalid_string", Param: "metadata",
					Message: "You can specify up to 50 keys in metadata."}
			}
			continue
		}
		if ignoredCreate[base] {
			continue
		}
		if len(segs) > 0 {
			return p, unknownParam(key)
		}
		var err *ParamError
		switch base {
		case "amount":
			p.Amount, err = parseInt("amount", val)
			switch {
			case err != nil:
			case p.Amount < 1:
				err = &ParamError{Code: "parameter_invalid_integer", Param: "amount",
					Message: "This value must be greater than or equal to 1."}
			case p.Amount > maxAmount:
				err = &ParamError{Code: "amount_too_large", Param: "amount",
					Message: "Amount must be no more than 99999999 in the smallest currency unit."}
			}
		case "currency":
			p.Currency = strings.ToLower(val)
			if !validCurrency(p.Currency) {
				err = &ParamError{Code: "parameter_invalid_string", Param: "currency",
					Message: fmt.Sprintf("Invalid currency: %s. Stripe currently supports these currencies: usd, eur, gbp, ...", val)}
			}
		case "customer":
			p.Customer = val
		case "payment_method":
			p.PaymentMethod = val
		case "description":
			p.Description = val
		case "receipt_email":
			p.ReceiptEmail = val
		case "capture_method":
			p.CaptureMethod = val
			if val != "automatic" && val != "automatic_async" && val != "manual" {
				err = &ParamError{Code: "parameter_invalid_string", Param: "capture_method",
					Message: fmt.Sprintf("Invalid capture_method: must be one of automatic, automatic_async, or manual")}
			}
		case "confirm":
			p.Confirm, err = parseBool("confirm", val)
		case "off_session":
			p.OffSession, err = parseOffSession(val)
		case "return_url":
			p.ReturnURL, err = parseReturnURL(val)
		default:
			err = unknownParam(key)
		}
		if err != nil {
			return p, err
		}
	}
	if !v.Has("amount") {
		return p, missingParam("amount")
	}
	if !v.Has("currency") {
		return p, missingParam("currency")
	}
	if p.CaptureMethod == "" {
		p.CaptureMethod = "automatic_async"
	}
	if p.Confirm && p.PaymentMethod == "" {
		return p, &ParamError{Code: "parameter_missing", Param: "payment_method",
			Message: "You cannot confirm this PaymentIntent because it's missing a payment method. To confirm it, pass payment_method."}
	}
	if p.OffSession && !p.Confirm {
		return p, &ParamError{Code: "parameter_invalid_empty", Param: "off_session",
			Message: "You may only specify `off_session` when `confirm` is true."}
	}
	return p, nil
}

func validCurrency(c string) bool {
	if len(c) != 3 {
		return false
	}
	for i := 0; i < 3; i++ {
		if c[i] < 'a' || c[i] > 'z' {
			return false
		}
	}
	return true
}

func parseConfirm(v url.Values) (confirmParams, *ParamError) {
	var p confirmParams
	for key, vs := range v {
		base, segs, ok := splitParam(key)
		if !ok {
			return p, unknownParam(key)
		}
		val := last(vs)
		if base == "expand" {
			if err := parseExpand(segs, vs, &p.common); err != nil {
				return p, err
			}
			continue
		}
		if ignoredConfirm[base] {
			continue
		}
		if len(segs) > 0 {
			return p, unknownParam(key)
		}
		var err *ParamError
		switch base {
		case "payment_method":
			p.PaymentMethod = val
		case "off_session":
			p.OffSession, err = parseOffSession(val)
		case "return_url":
			p.ReturnURL, err = parseReturnURL(val)
		default:
			err = unknownParam(key)
		}
		if err != nil {
			return p, err
		}
	}
	return p, nil
}

// parseReturnURL accepts an absolute http(s) URL, as Stripe does for return_url.
func parseReturnURL(val string) (string, *ParamError) {
	u, err := url.Parse(val)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || len(val) > 2048 {
		return "", &ParamError{Code: "url_invalid", Param: "return_url", Message: "Not a valid URL"}
	}
	return val, nil
}

func parseList(v url.Values) (listParams, *ParamError) {
	p := listParams{Limit: 10}
	for key, vs := range v {
		base, segs, ok := splitParam(key)
		if !ok {
			return p, unknownParam(key)
		}
		val := last(vs)
		if base == "expand" {
			if err := parseExpand(segs, vs, &p.common); err != nil {
				return p, err
			}
			continue
		}
		if base == "created" {
			if err := parseCreated(key, segs, val, &p.Created); err != nil {
				return p, err
			}
			continue
		}
		if len(segs) > 0 {
			return p, unknownParam(key)
		}
		switch base {
		case "limit":
			n, err := parseLimit(val)
			if err != nil {
				return p, err
			}
			p.Limit = n
		case "starting_after":
			p.StartingAfter = val
		case "ending_before":
			p.EndingBefore = val
		case "customer":
			p.Customer = val
		default:
			return p, unknownParam(key)
		}
	}
	if p.StartingAfter != "" && p.EndingBefore != "" {
		return p, &ParamError{Code: "parameter_invalid_empty", Param: "ending_before",
			Message: "You may only specify one of these parameters: ending_before, starting_after."}
	}
	return p, nil
}

// parseCreated folds created=T and created[gt|gte|lt|lte]=T into one inclusive range.
func parseCreated(key string, segs []string, val string, r *createdRange) *ParamError {
	if len(segs) > 1 {
		return unknownParam(key)
	}
	t, err := parseInt(key, val)
	if err != nil {
		return err
	}
	if !r.set {
		*r = createdRange{GTE: minInt64, LTE: maxInt64, set: true}
	}
	op := ""
	if len(segs) == 1 {
		op = segs[0]
	}
	switch op {
	case "":
		r.GTE, r.LTE = max(r.GTE, t), min(r.LTE, t)
	case "gte":
		r.GTE = max(r.GTE, t)
	case "gt":
		if t == maxInt64 {
			r.GTE = maxInt64
			r.LTE = minInt64
		} else {
			r.GTE = max(r.GTE, t+1)
		}
	case "lte":
		r.LTE = min(r.LTE, t)
	case "lt":
		if t == minInt64 {
			r.GTE = maxInt64
			r.LTE = minInt64
		} else {
			r.LTE = min(r.LTE, t-1)
		}
	default:
		return unknownParam(key)
	}
	return nil
}

const (
	minInt64 = -1 << 63
	maxInt64 = 1<<63 - 1
)

// parseLimit reads a list's limit, 1 to 100 as Stripe allows, for every list and search route.
func parseLimit(val string) (int, *ParamError) {
	n, err := parseInt("limit", val)
	if err != nil {
		return 0, err
	}
	if n < 1 || n > 100 {
		return 0, &ParamError{Code: "parameter_invalid_integer", Param: "limit",
			Message: "This value must be greater than or equal to 1 and less than or equal to 100."}
	}
	return int(n), nil
}
