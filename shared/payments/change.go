package payments

import (
	"fmt"
	"time"

	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/store"
)

// KindPublishChange is the outbox kind that publishes one applied change of a payment to the
// outbound event feed (shared/feed), committed with the change itself.
const KindPublishChange = "publish_change"

// Change is the payload of a KindPublishChange message: the payment as the change left it.
type Change struct {
	PaymentID string    `json:"payment_id"`
	Version   int64     `json:"version"`
	At        time.Time `json:"at"`
	Payment   View      `json:"payment"`
}

// ChangeMessage is the outbox write that publishes p's new state, for the transaction that
// stores it. Its id is (payment, version): the same change written again (a redelivered
// webhook, a replayed commit) is the same message, and changes of one payment sort by
// version among messages due at the same instant.
func ChangeMessage(p Payment, now time.Time) (store.Write, error) {
	return outbox.New(KindPublishChange, fmt.Sprintf("change#%s#%020d", p.ID, p.Version),
		Change{PaymentID: p.ID, Version: p.Version, At: now.UTC(), Payment: p.View()}, now)
}
