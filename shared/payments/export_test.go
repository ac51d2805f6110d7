package payments

import (
	"net/http/httptest"
	"testing"
)

// What the external tests (resolvequeue_test.go: package resolvequeue imports payments) use of
// the fixture.

func NewFixture(t *testing.T) *fixture { return newFixture(t) }

func (f *fixture) Service() *Service             { return f.svc }
func (f *fixture) ProviderCalls() map[string]int { return f.prov.calls }
func (f *fixture) Jobs() []ResolveJob            { return f.jobs.list }
func (f *fixture) Drain(t *testing.T)            { f.drain(t) }
func (f *fixture) Do(t *testing.T, method, path, key, body string) *httptest.ResponseRecorder {
	return f.do(t, method, path, key, body)
}

var Body = body
