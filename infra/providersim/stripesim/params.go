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

// field is one form key as Stripe's decoder reads it.
type field struct {
	key  string   // as sent: metadata[order]
	base string   // before the brackets: metadata
	segs []string // inside the brackets: order
	vs   []string // every value sent
	val  string   // the last value, the one Stripe keeps
}

// eachField calls f for every key of form and stops at the first error; a malformed key is
// an unknown parameter.
func eachField(form url.Values, f func(field) *ParamError) *ParamError {
	for key, vs := range form {
		base, segs, ok := splitParam(key)
		if !ok {
			return unknownParam(key)
		}
		if err := f(field{key: key, base: base, segs: segs, vs: vs, val: last(vs)}); err != nil {
			return err
		}
	}
	return nil
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

// parseAmount reads an amount: an integer of at least 1.
func parseAmount(name, s string) (int64, *ParamError) {
	n, err := parseInt(name, s)
	if err == nil && n < 1 {
		err = &ParamError{Code: "parameter_invalid_integer", Param: name,
			Message: "This value must be greater than or equal to 1."}
	}
	return n, err
}

// common holds what every PaymentIntent route may carry.
type common struct {
	Expand []string
}

// createParams are the accepted parameters of POST /v1/payment_intents: a create with
// confirm=true takes what a confirm takes.
type createParams struct {
	confirmParams
	Amount        int64
	Currency      string
	Customer      string
	Description   string
	ReceiptEmail  string
	CaptureMethod string
	Confirm       bool
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
	pageParams
	Customer string
}

// pageParams are what every list route takes to choose its page.
type pageParams struct {
	Limit         int
	StartingAfter string
	EndingBefore  string
	Created       createdRange
}

// field takes f if it is a paging parameter; ok is false for any other key.
func (p *pageParams) field(f field) (ok bool, err *ParamError) {
	switch {
	case f.base == "created":
		return true, p.Created.parse(f)
	case len(f.segs) > 0:
		return false, nil
	}
	switch f.base {
	case "limit":
		p.Limit, err = parseLimit(f.val)
	case "starting_after":
		p.StartingAfter = f.val
	case "ending_before":
		p.EndingBefore = f.val
	default:
		return false, nil
	}
	return true, err
}

// oneCursor refuses a page asked both after and before a cursor. The routes differ in the
// code they answer: the event list says parameter_invalid_string, the others
// parameter_invalid_empty.
func (p *pageParams) oneCursor(code string) *ParamError {
	if p.StartingAfter != "" && p.EndingBefore != "" {
		return &ParamError{Code: code, Param: "ending_before",
			Message: "You may only specify one of these parameters: ending_before, starting_after."}
	}
	return nil
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

// expand takes expand[]=x and expand[0]=x as stripe-go sends it.
func (c *common) expand(f field) *ParamError {
	if len(f.segs) != 1 {
		return unknownParam("expand")
	}
	if f.segs[0] != "" {
		if _, err := strconv.Atoi(f.segs[0]); err != nil {
			return unknownParam("expand[" + f.segs[0] + "]")
		}
	}
	c.Expand = append(c.Expand, f.vs...)
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
	err := eachField(v, func(f field) *ParamError {
		if len(f.val) > maxStringParam {
			return &ParamError{Code: "parameter_invalid_string", Param: f.key,
				Message: fmt.Sprintf("Invalid string: %s...; must be at most %d characters", f.val[:20], maxStringParam)}
		}
		switch {
		case f.base == "expand":
			return p.expand(f)
		case f.base == "metadata":
			return p.metadata(f)
		case ignoredCreate[f.base]:
			return nil
		case len(f.segs) > 0:
			return unknownParam(f.key)
		}
		if ok, err := p.confirmParams.field(f); ok {
			return err
		}
		var err *ParamError
		switch f.base {
		case "amount":
			p.Amount, err = parseAmount("amount", f.val)
			if err == nil && p.Amount > maxAmount {
				err = &ParamError{Code: "amount_too_large", Param: "amount",
					Message: "Amount must be no more than 99999999 in the smallest currency unit."}
			}
		case "currency":
			p.Currency = strings.ToLower(f.val)
			if !validCurrency(p.Currency) {
				err = &ParamError{Code: "parameter_invalid_string", Param: "currency",
					Message: fmt.Sprintf("Invalid currency: %s. Stripe currently supports these currencies: usd, eur, gbp, ...", f.val)}
			}
		case "customer":
			p.Customer = f.val
		case "description":
			p.Description = f.val
		case "receipt_email":
			p.ReceiptEmail = f.val
		case "capture_method":
			p.CaptureMethod = f.val
			if f.val != "automatic" && f.val != "automatic_async" && f.val != "manual" {
				err = &ParamError{Code: "parameter_invalid_string", Param: "capture_method",
					Message: fmt.Sprintf("Invalid capture_method: must be one of automatic, automatic_async, or manual")}
			}
		case "confirm":
			p.Confirm, err = parseBool("confirm", f.val)
		default:
			err = unknownParam(f.key)
		}
		return err
	})
	if err != nil {
		return p, err
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

// metadata takes metadata[key]=value within Stripe's limits; an empty value unsets a key.
func (p *createParams) metadata(f field) *ParamError {
	if len(f.segs) != 1 || f.segs[0] == "" {
		return unknownParam(f.key)
	}
	if len(f.segs[0]) > maxMetadataKeyLen || len(f.val) > maxMetadataValueLen {
		return &ParamError{Code: "parameter_invalid_string", Param: f.key,
			Message: "Metadata keys can have up to 40 characters and values up to 500 characters."}
	}
	if p.Metadata == nil {
		p.Metadata = map[string]string{}
	}
	if f.val != "" {
		p.Metadata[f.segs[0]] = f.val
	}
	if len(p.Metadata) > maxMetadataKeys {
		return &ParamError{Code: "parameter_invalid_string", Param: "metadata",
			Message: "You can specify up to 50 keys in metadata."}
	}
	return nil
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
	err := eachField(v, func(f field) *ParamError {
		switch {
		case f.base == "expand":
			return p.expand(f)
		case ignoredConfirm[f.base]:
			return nil
		case len(f.segs) > 0:
			return unknownParam(f.key)
		}
		if ok, err := p.field(f); ok {
			return err
		}
		return unknownParam(f.key)
	})
	return p, err
}

// field takes the plain keys a confirm sets; ok is false for any other key.
func (p *confirmParams) field(f field) (ok bool, err *ParamError) {
	switch f.base {
	case "payment_method":
		p.PaymentMethod = f.val
	case "off_session":
		p.OffSession, err = parseOffSession(f.val)
	case "return_url":
		p.ReturnURL, err = parseReturnURL(f.val)
	default:
		return false, nil
	}
	return true, err
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
	p := listParams{pageParams: pageParams{Limit: 10}}
	err := eachField(v, func(f field) *ParamError {
		if f.base == "expand" {
			return p.expand(f)
		}
		if ok, err := p.pageParams.field(f); ok {
			return err
		}
		if f.base == "customer" && len(f.segs) == 0 {
			p.Customer = f.val
			return nil
		}
		return unknownParam(f.key)
	})
	if err == nil {
		err = p.oneCursor("parameter_invalid_empty")
	}
	return p, err
}

// parse folds created=T and created[gt|gte|lt|lte]=T into one inclusive range.
func (r *createdRange) parse(f field) *ParamError {
	if len(f.segs) > 1 {
		return unknownParam(f.key)
	}
	t, err := parseInt(f.key, f.val)
	if err != nil {
		return err
	}
	if !r.set {
		*r = createdRange{GTE: minInt64, LTE: maxInt64, set: true}
	}
	op := ""
	if len(f.segs) == 1 {
		op = f.segs[0]
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
		return unknownParam(f.key)
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
