package providertest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/provider/providertest"
)

func TestFakePassesTheSuite(t *testing.T) {
	providertest.Run(t, "fake", func(t *testing.T) provider.Provider { return &providertest.Fake{} })
}

func TestFakeFailureAfterEffect(t *testing.T) {
	f := &providertest.Fake{}
	unknown := &provider.UnknownOutcomeError{Op: "create"}
	f.FailNext(1, unknown, true)
	req := provider.CreateRequest{Amount: 1, Currency: "usd", PaymentMethod: "pm_card_visa", IdempotencyKey: "k"}
	if _, err := f.Create(context.Background(), req); !errors.As(err, new(*provider.UnknownOutcomeError)) {
		t.Fatalf("err = %v", err)
	}
	p, err := f.Create(context.Background(), req)
	if err != nil || p.Status != provider.StatusSucceeded || f.Len() != 1 || f.Calls() != 2 {
		t.Fatalf("repeat = %+v, %v; payments %d, calls %d: want the first charge, once", p, err, f.Len(), f.Calls())
	}
}
