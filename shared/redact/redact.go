package redact

import (
	"bytes"
	"io"
	"mime"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/runtwice/twice/shared/redact/header"
)

// Redacted is what replaces a sensitive value.
const Redacted = header.Redacted

// Caps on what is not a body.
const (
	maxHeaderValue = 1024
	maxHeaderName  = 128
	maxPath        = 2048
	// MaxLogField caps each string a log line carries from outside input (CapLog).
	MaxLogField = 256
)

// CapLog readies a string from outside input for a log line: redacted and cut at MaxLogField
// bytes, the cut marked with the size it had ("…[+204772 bytes]").
func CapLog(s string) string {
	s = Text(s)
	c, cut := Cap(s, MaxLogField)
	if !cut {
		return s
	}
	return c + "…[+" + strconv.Itoa(len(s)-len(c)) + " bytes]"
}

// Sensitive body fields. A field's name (a JSON key at any depth; the last bracketed segment
// of a form key, so card[number] is "number") is compared lower-cased with "_", "-" and "."
// removed, so card_cvc, Card-CVC and cardCvc are one name. Its value is never stored when the
// name is
//
//   - a card number field, exactly: number, cardnumber, ccnumber, pan, primaryaccountnumber
//     (the value keeps its last four digits: "[card ****4242]");
//   - or contains: cvc, cvv, cvn, securitycode, secret, password, passwd, passphrase, apikey,
//     privatekey, or ends in token or signature;
//   - or is, exactly: pin, csc, cid (the card security code's other names).
//
// Expiry month and year are kept: without the number they identify nothing, and they explain
// expired-card declines. SensitiveFieldNames lists examples for the documentation and tests.
func sensitiveName(name string) bool {
	n := normalName(name)
	if cardNumberNames[n] || exactSecretNames[n] {
		return true
	}
	for _, sub := range secretSubstrings {
		if strings.Contains(n, sub) {
			return true
		}
	}
	return strings.HasSuffix(n, "token") || strings.HasSuffix(n, "signature")
}

var (
	cardNumberNames  = map[string]bool{"number": true, "cardnumber": true, "ccnumber": true, "pan": true, "primaryaccountnumber": true}
	exactSecretNames = map[string]bool{"pin": true, "csc": true, "cid": true}
	secretSubstrings = []string{"cvc", "cvv", "cvn", "securitycode", "secret", "password", "passwd", "passphrase", "apikey", "privatekey"}
)

// SensitiveFieldNames are examples of field names whose values are never stored.
var SensitiveFieldNames = []string{"number", "card_number", "cvc", "card_cvc", "cvv", "cvv2", "cvc2", "security_code",
	"card_security_code", "pin", "password", "client_secret", "api_key", "access_token", "refresh_token", "id_token",
	"token", "webhook_secret", "signature"}

func normalName(name string) string {
	var b strings.Builder
	b.Grow(len(name))
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_' || c == '-' || c == '.':
		case c >= 'A' && c <= 'Z':
			b.WriteByte(c + 'a' - 'A')
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// Header flattens h (several values joined by ", ") and redacts it: the sensitive headers
// (header.Sensitive) become "[redacted]" (Authorization keeps its scheme: "Bearer [redacted]"),
// and every other value goes through Text and is capped at 1 KiB, as is every name.
func Header(h http.Header) map[string]string {
	if len(h) == 0 {
		return nil
	}
	out := make(map[string]string, len(h))
	for k, vs := range h {
		addHeader(out, k, strings.Join(vs, ", "))
	}
	return out
}

// HeaderMap is Header for an already flattened map, so a record is redacted whoever built it.
// It is idempotent: HeaderMap(Header(h)) is Header(h).
func HeaderMap(h map[string]string) map[string]string {
	if len(h) == 0 {
		return nil
	}
	out := make(map[string]string, len(h))
	for k, v := range h {
		addHeader(out, k, v)
	}
	return out
}

func addHeader(out map[string]string, k, v string) {
	k = http.CanonicalHeaderKey(k)
	k, _ = Cap(Text(k), maxHeaderName)
	v = redactHeaderValue(k, v)
	if prev, ok := out[k]; ok {
		// Two spellings of one header in a flattened map: keep both values, deterministically.
		if prev < v {
			v = prev + ", " + v
		} else {
			v = v + ", " + prev
		}
	}
	out[k] = v
}

func redactHeaderValue(k, v string) string {
	if header.Sensitive(k) {
		if k == "Authorization" || k == "Proxy-Authorization" {
			if scheme, _, ok := strings.Cut(v, " "); ok && isWord(scheme) {
				return scheme + " " + Redacted
			}
		}
		return Redacted
	}
	v, _ = Cap(Text(v), maxHeaderValue)
	return v
}

func isWord(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// Body redacts a request or response body by its content type: JSON bodies field by
// field at any depth, form-encoded bodies (Stripe's API) pair by pair, anything else as text.
// An empty or generic content type is sniffed. Whatever the type, the result then goes
// through Text.
//
// Invalid or truncated JSON falls back to a pattern over "name": value pairs, so a body cut
// before redaction still loses its sensitive fields.
func Body(contentType string, body []byte) string {
	if len(body) == 0 {
		return ""
	}
	var s string
	switch bodyKind(contentType, body) {
	case kindJSON:
		var err error
		if s, err = redactJSON(body); err != nil {
			s = redactJSONText(string(body))
		}
	case kindForm:
		s = redactForm(string(body))
	default:
		s = string(body)
	}
	return Text(s)
}

type kind int

const (
	kindText kind = iota
	kindJSON
	kindForm
)

func bodyKind(contentType string, body []byte) kind {
	mt, _, _ := mime.ParseMediaType(contentType)
	switch {
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		return kindJSON
	case mt == "application/x-www-form-urlencoded":
		return kindForm
	case mt != "" && mt != "text/plain" && mt != "application/octet-stream":
		return kindText
	}
	t := bytes.TrimLeft(body, " \t\r\n")
	if len(t) > 0 && (t[0] == '{' || t[0] == '[') {
		return kindJSON
	}
	if bytes.IndexByte(body, '=') > 0 && bytes.IndexAny(body, " \t\r\n") < 0 {
		return kindForm
	}
	return kindText
}

var jsonOpts = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}

// redactJSON rewrites a JSON document with sensitive members replaced, keeping member order.
func redactJSON(body []byte) (string, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(body), jsonOpts...)
	var buf bytes.Buffer
	buf.Grow(len(body))
	enc := jsontext.NewEncoder(&buf, jsonOpts...)
	for {
		k, n := dec.StackIndex(dec.StackDepth())
		atName := k == '{' && n%2 == 0
		tok, err := dec.ReadToken()
		if err != nil {
			if err == io.EOF {
				// The encoder ends each top-level value with a newline the body did not have.
				return strings.TrimSuffix(buf.String(), "\n"), nil
			}
			return "", err
		}
		switch tok.Kind() {
		case '"', '0':
			// Redact the decoded text, where escapes cannot hide a card number; a number that
			// was one becomes a string, so the document stays valid JSON.
			s := tok.String()
			if r := Text(s); r != s {
				tok = jsontext.String(r)
			}
		}
		if err := enc.WriteToken(tok); err != nil {
			return "", err
		}
		if !atName || tok.Kind() != '"' {
			continue
		}
		name := tok.String()
		if !sensitiveName(name) {
			continue
		}
		v, err := dec.ReadValue()
		if err != nil {
			return "", err
		}
		if err := enc.WriteToken(jsontext.String(mask(name, string(v)))); err != nil {
			return "", err
		}
	}
}

// jsonPair finds "name": value in text that is not valid JSON; a value cut at the end of the
// text still matches. The name is checked with sensitiveName.
//
// No counted repetition: Go compiles {1,128} into 128 copies of the group, which made the
// pattern cost hundreds of steps a byte (seconds for a 180 KiB body that is not JSON).
var jsonPair = regexp.MustCompile(`("((?:[^"\\]|\\.)+)"\s*:\s*)("(?:[^"\\]|\\.)*"?|[^,}\]\s]*)`)

func redactJSONText(s string) string {
	ms := jsonPair.FindAllStringSubmatchIndex(s, -1)
	if len(ms) == 0 {
		return s
	}
	var b strings.Builder
	last := 0
	for _, m := range ms {
		name := s[m[4]:m[5]]
		if len(name) > 128 || !sensitiveName(name) || m[6] == m[7] {
			continue
		}
		b.WriteString(s[last:m[6]])
		b.WriteString(`"` + mask(name, s[m[6]:m[7]]) + `"`)
		last = m[7]
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// formEscape escapes what would change the meaning of a form value, and no more, so a redacted
// value stays readable.
var formEscape = strings.NewReplacer("%", "%25", "&", "%26", "=", "%3D", "+", "%2B", "#", "%23", " ", "+")

// redactForm redacts an application/x-www-form-urlencoded body, keeping pair order.
func redactForm(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for first := true; ; first = false {
		pair, rest, more := strings.Cut(s, "&")
		if !first {
			b.WriteByte('&')
		}
		b.WriteString(redactPair(pair))
		if !more {
			break
		}
		s = rest
	}
	return b.String()
}

func redactPair(pair string) string {
	rawKey, rawVal, hasVal := strings.Cut(pair, "=")
	if !hasVal {
		return pair
	}
	key := unescape(rawKey)
	name := formFieldName(key)
	if sensitiveName(name) {
		return redactFormKey(rawKey, key) + "=" + formEscape.Replace(mask(name, unescape(rawVal)))
	}
	rawKey = redactFormKey(rawKey, key)
	pair = rawKey + "=" + rawVal
	// A value with escapes may hide a card number ("4242%204242..."); one without is left to
	// the Text pass over the whole body.
	if hasEscapes(rawVal) {
		v := unescape(rawVal)
		if r := Text(v); r != v {
			return rawKey + "=" + formEscape.Replace(r)
		}
	}
	return pair
}

// redactFormKey redacts a form key whose escapes hide a card number or a secret.
func redactFormKey(rawKey, key string) string {
	if !hasEscapes(rawKey) {
		return rawKey
	}
	if r := Text(key); r != key {
		return formEscape.Replace(r)
	}
	return rawKey
}

// formFieldName is the last bracketed segment of a form key: card[number] -> number,
// payment_method_data[card][cvc] -> cvc, amount -> amount.
func formFieldName(key string) string {
	key = strings.TrimSuffix(key, "]")
	if i := strings.LastIndexByte(key, '['); i >= 0 {
		return key[i+1:]
	}
	return key
}

// unescape decodes a form component, or returns it as it is when it is not valid.
func unescape(s string) string {
	if !hasEscapes(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '+':
			b.WriteByte(' ')
		case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func hasEscapes(s string) bool {
	return strings.IndexByte(s, '%') >= 0 || strings.IndexByte(s, '+') >= 0
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}

// mask is what a sensitive field's value becomes: a card number keeps its last four digits, so
// an operator can tell which card was used; everything else is gone.
func mask(name, v string) string {
	if !cardNumberNames[normalName(name)] {
		return Redacted
	}
	if u := strings.Trim(v, `"`); u == Redacted || isCardMask(u) {
		return u // already masked: redacting twice changes nothing
	}
	var digits []byte
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case isDigit(c):
			digits = append(digits, c)
		case isSeparator(c) || c == '"':
		default:
			return Redacted
		}
	}
	if len(digits) < 12 || len(digits) > 19 {
		return Redacted
	}
	return cardMask(string(digits[len(digits)-4:]))
}

func cardMask(last4 string) string { return "[card ****" + last4 + "]" }

func isCardMask(s string) bool {
	d, ok := strings.CutPrefix(s, "[card ****")
	d, ok2 := strings.CutSuffix(d, "]")
	if !ok || !ok2 || len(d) != 4 {
		return false
	}
	for i := 0; i < len(d); i++ {
		if !isDigit(d[i]) {
			return false
		}
	}
	return true
}

// Text removes secrets from any text:
//
//   - Stripe secret and restricted keys (sk_live_, sk_test_, rk_live_, rk_test_) and webhook
//     secrets (whsec_) keep their prefix: "sk_live_[redacted]".
//   - Client secrets (pi_123_secret_abc) keep the object id: "pi_123_secret_[redacted]".
//   - Card numbers become "[card ****4242]". A card number is 13 to 19 digits, possibly in
//     groups joined by single separators (space, "-", "." or "/"), that passes the Luhn
//     check; it starts and ends
//     at the edges of digit groups, so "4242 4242 4242 4242 12/34" loses its card number and
//     keeps the expiry, while a 20-digit reference is left alone.
//   - Ids are not card numbers: digits inside an id of the form Stripe and twice issue
//     (lower-case letters and "_", then letters, digits and "_": "evt_000000000000000A",
//     "pay_…", "twice_pay_…") are left alone, so an id reads as issued and two ids never
//     mask alike.
//
// Text with none of these comes back unchanged and unallocated.
func Text(s string) string {
	var b []byte
	changed := false
	last := 0 // s[last:i] is not yet copied to b
	var tok idToken
	for i := 0; i < len(s); {
		c := s[i]
		if isDigit(c) {
			if tok.inID(s, i) {
				for i < len(s) && isDigit(s[i]) {
					i++
				}
				continue
			}
			end, last4, ok := card(s, i)
			if ok {
				if !changed {
					b = make([]byte, 0, len(s))
					changed = true
				}
				b = append(b, s[last:i]...)
				b = append(b, cardMask(last4)...)
				last = end
				tok.start = end // the mask ends the run
			}
			i = end
			continue
		}
		if n, keep := secretAt(s, i); n > 0 {
			if !changed {
				b = make([]byte, 0, len(s))
				changed = true
			}
			b = append(b, s[last:i+keep]...)
			b = append(b, Redacted...)
			i += n
			last = i
			tok.start = i // what follows a secret starts afresh
			continue
		}
		if !isIDChar(c) {
			tok.start = i + 1
		}
		i++
	}
	if !changed {
		return s
	}
	return string(append(b, s[last:]...))
}

func isIDChar(c byte) bool { return isAlnum(c) || c == '_' }

// idToken follows Text's scan: start is where the current run of id characters began,
// and the answer for that run is kept, so a long run costs one look however many digit
// groups it holds.
type idToken struct {
	start   int
	checked int // 1 + the start last checked (0: none)
	id      bool
}

// inID reports whether the digit at s[i] continues an id: the run of id characters it is in
// began with lower-case letters and "_".
func (t *idToken) inID(s string, i int) bool {
	if t.start >= i {
		return false // the digits begin the run
	}
	if t.checked != t.start+1 {
		j := t.start
		for j < i && s[j] >= 'a' && s[j] <= 'z' {
			j++
		}
		t.checked, t.id = t.start+1, j > t.start && j < i && s[j] == '_'
	}
	return t.id
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// isSeparator is what may join the digit groups of a card number: "4242 4242", "4242-4242",
// "4242.4242", "4242/4242".
func isSeparator(c byte) bool { return c == ' ' || c == '-' || c == '.' || c == '/' }

func isAlnum(c byte) bool { return isDigit(c) || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func isBase64(c byte) bool { return isAlnum(c) || c == '+' || c == '/' || c == '=' }

// secretAt reports a secret starting at s[i]: n bytes in all, of which the first keep (the
// prefix) stay. The first byte picks the candidate prefixes, so ordinary text costs one switch.
func secretAt(s string, i int) (n, keep int) {
	rest := s[i:]
	var p string
	class := isAlnum
	switch s[i] {
	case 's', 'r':
		// sk_live_, sk_test_, rk_live_, rk_test_
		if len(rest) < 8 || rest[1] != 'k' || rest[2] != '_' || rest[7] != '_' || (rest[3:7] != "live" && rest[3:7] != "test") {
			return 0, 0
		}
		p = rest[:8]
	case 'w':
		if !strings.HasPrefix(rest, "whsec_") {
			return 0, 0
		}
		p, class = "whsec_", isBase64
	case '_':
		if !strings.HasPrefix(rest, "_secret_") {
			return 0, 0
		}
		p = "_secret_"
	default:
		return 0, 0
	}
	j := len(p)
	for j < len(rest) && class(rest[j]) {
		j++
	}
	if j == len(p) {
		return 0, 0
	}
	return j, len(p)
}

// card looks for a card number starting at the digit group that starts at s[i]. It returns
// the end of the card number and its last four digits, or, if there is none, the end of that
// first digit group (where the scan goes on).
func card(s string, i int) (end int, last4 string, ok bool) {
	var ends [19]int // ends of the groups that fit in 19 digits
	groups, digits := 0, 0
	firstEnd := -1
	for j := i; ; {
		k := j
		for k < len(s) && isDigit(s[k]) {
			k++
		}
		if firstEnd < 0 {
			firstEnd = k
		}
		digits += k - j
		if digits > 19 {
			break
		}
		ends[groups] = k
		groups++
		if k+1 < len(s) && isSeparator(s[k]) && isDigit(s[k+1]) {
			j = k + 1
			continue
		}
		break
	}
	// Longest first: "4242 4242 4242 4242" is one card, not a shorter one inside it.
	for g := groups; g > 0; g-- {
		span := s[i:ends[g-1]]
		n, valid := luhn(span)
		if n < 13 {
			break
		}
		if valid {
			return ends[g-1], lastDigits(span, 4), true
		}
	}
	return firstEnd, "", false
}

// luhn counts the digits of span (digits and separators) and checks them.
func luhn(span string) (n int, valid bool) {
	sum := 0
	double := false
	for i := len(span) - 1; i >= 0; i-- {
		c := span[i]
		if !isDigit(c) {
			continue
		}
		d := int(c - '0')
		if double {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
		double = !double
		n++
	}
	return n, sum%10 == 0
}

func lastDigits(span string, n int) string {
	out := make([]byte, n)
	for i := len(span) - 1; i >= 0 && n > 0; i-- {
		if isDigit(span[i]) {
			n--
			out[n] = span[i]
		}
	}
	return string(out[n:])
}

// Cap cuts s to at most n bytes, on a UTF-8 boundary, and reports whether it cut. A cut never
// ends inside a digit group: the kept part of a long number could otherwise read as a card
// number that Text, which saw the whole number, rightly left alone.
func Cap(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	if n <= 0 {
		return "", true
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	if isDigit(s[cut]) {
		for cut > 0 && isDigit(s[cut-1]) {
			cut--
		}
	}
	return s[:cut], true
}

// Path redacts a request path and its query (form-encoded), and caps it at 2 KiB.
func Path(p string) string {
	path, query, ok := strings.Cut(p, "?")
	if ok {
		p = path + "?" + redactForm(query)
	}
	p, _ = Cap(Text(p), maxPath)
	return p
}
