package opsapi_test

import (
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/runtwice/twice/shared/boltstore"
	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/opsapi"
)

func Example() {
	dir, _ := os.MkdirTemp("", "ops")
	defer os.RemoveAll(dir)
	s, _ := boltstore.Open(filepath.Join(dir, "twice.db"))
	defer s.Close()
	table := &deadletter.Records{Store: s, Log: slog.New(slog.DiscardHandler)}
	h, _ := opsapi.New(opsapi.Handler{Records: table, Token: "local-operator-token"})

	req := httptest.NewRequest("GET", "/ops/deadletters", nil)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	fmt.Println(w.Code, w.Header().Get("Content-Type"))

	req.Header.Set("Authorization", "Bearer local-operator-token")
	w = httptest.NewRecorder()
	h.ServeHTTP(w, req)
	fmt.Println(w.Code, w.Body.String())
	// Output:
	// 401 application/problem+json
	// 200 {"records":[],"scanned":0}
}
