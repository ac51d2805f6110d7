package problem

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestWrite(t *testing.T) {
	rec := httptest.NewRecorder()
	p := Problem{Title: http.StatusText(http.StatusUnprocessableEntity), Status: http.StatusUnprocessableEntity,
		Detail: "the request differs from the first one with this key"}
	p.Extra = map[string]any{"fields": []string{"amount"}, "title": "ignored: members cannot shadow"}
	Write(rec, p)
	if rec.Code != 422 {
		t.Fatalf("status %d", rec.Code)
	}
	if ct := rec.Header().Get("Content-Type"); ct != ContentType {
		t.Fatalf("content type %q", ct)
	}
	var got map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got["title"] != "Unprocessable Entity" || got["status"] != float64(422) || got["type"] != "about:blank" {
		t.Fatalf("document %v", got)
	}
	if f, _ := got["fields"].([]any); len(f) != 1 || f[0] != "amount" {
		t.Fatalf("fields %v", got["fields"])
	}
}

func TestWriteUnmarshalableExtra(t *testing.T) {
	rec := httptest.NewRecorder()
	p := Problem{Title: "Bad Request", Status: 400, Detail: "bad"}
	p.Extra = map[string]any{"ch": make(chan int)}
	Write(rec, p)
	if rec.Code != 400 || !json.Valid(rec.Body.Bytes()) {
		t.Fatalf("got %d %s", rec.Code, rec.Body)
	}
}
