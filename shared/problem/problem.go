package problem

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// ContentType is the media type of a problem document.
const ContentType = "application/problem+json"

// Problem is an RFC 9457 problem document. Extra members are merged at the top level.
type Problem struct {
	Type   string         `json:"type,omitempty"`
	Title  string         `json:"title"`
	Status int            `json:"status"`
	Detail string         `json:"detail,omitempty"`
	Extra  map[string]any `json:"-"`
	// RetryAfter, when positive, is sent as the Retry-After header (seconds): when a retry may
	// succeed. It is not a member of the document.
	RetryAfter int `json:"-"`
}

// MarshalJSON flattens Extra into the document, as RFC 9457 extension members.
func (p Problem) MarshalJSON() ([]byte, error) {
	m := make(map[string]any, len(p.Extra)+4)
	for k, v := range p.Extra {
		m[k] = v
	}
	if p.Type != "" {
		m["type"] = p.Type
	} else {
		m["type"] = "about:blank"
	}
	m["title"] = p.Title
	m["status"] = p.Status
	if p.Detail != "" {
		m["detail"] = p.Detail
	}
	return json.Marshal(m)
}

// Write sends p with its status.
func Write(w http.ResponseWriter, p Problem) {
	b, err := json.Marshal(p)
	if err != nil { // Extra held something unmarshalable: drop it rather than fail.
		p.Extra = nil
		b, _ = json.Marshal(p)
	}
	h := w.Header()
	h.Set("Content-Type", ContentType)
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("Cache-Control", "no-store")
	if p.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(p.RetryAfter))
	}
	w.WriteHeader(p.Status)
	_, _ = w.Write(b)
}

// Error sends a problem with no type (about:blank: the status alone says what happened), for
// the local stack's own routes and the provider simulator, which have no problem codes.
func Error(w http.ResponseWriter, status int, detail string) {
	Write(w, Problem{Title: http.StatusText(status), Status: status, Detail: detail})
}
