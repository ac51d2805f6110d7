package payments

import (
	"testing"
	"time"

	"github.com/runtwice/twice/shared/provider"
)

// Nothing but a refund follows a charge: a report of any other status over a charged payment
// leaves it as it is, whatever its version, so its write loses the version check.
func TestTransitionNeverTakesBackACharge(t *testing.T) {
	at := created.Add(time.Hour)
	for _, from := range []string{StatusSucceeded, StatusRefunded} {
		for _, to := range []string{StatusPending, StatusProcessing, StatusDeclined, StatusRequiresAction, StatusRequiresCapture, StatusCanceled} {
			t.Run(from+" to "+to, func(t *testing.T) {
				p := Payment{ID: "pay_1", Status: from, Version: VersionAt(created, from), UpdatedAt: created}
				was := p
				p.Transition(to, &provider.Decline{Code: "processing_error"}, nil, VersionAt(at, to), at)
				if p.Status != was.Status || p.Version != was.Version || !p.UpdatedAt.Equal(was.UpdatedAt) || p.Decline != nil {
					t.Fatalf("%+v became %+v", was, p)
				}
			})
		}
	}
	p := Payment{ID: "pay_1", Status: StatusRefunded, Version: VersionAt(created, StatusRefunded)}
	p.Transition(StatusSucceeded, nil, nil, VersionAt(at, StatusSucceeded), at)
	if p.Status != StatusSucceeded {
		t.Fatalf("a refund that failed later left %q", p.Status)
	}
}
