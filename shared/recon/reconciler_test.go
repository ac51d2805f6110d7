package recon_test

import (
	"context"
	"errors"
	"testing"

	"github.com/runtwice/twice/shared/recon"
)

// TestRunWithoutRequiredFields: a Reconciler literal missing Store, Provider or Sink fails its
// run with ErrConfig instead of panicking.
func TestRunWithoutRequiredFields(t *testing.T) {
	var r recon.Reconciler
	if _, err := r.Run(context.Background(), r.DefaultWindow()); !errors.Is(err, recon.ErrConfig) {
		t.Fatalf("Run on an empty Reconciler: %v, want ErrConfig", err)
	}
}
