package webhooks

import (
	"net/url"
	"strconv"
	"strings"

	"github.com/runtwice/twice/shared/provider"
)

// EventKey is the first dedupe key: the provider's event id.
func EventKey(e Event) string {
	return join(e.Provider, e.ID)
}

// ChangeKey is the second dedupe key, (object id, event type, object version): a provider can
// send two Event objects with different ids for one change, and this key is equal for both.
//
// Refunds and disputes add what changed: two partial refunds (or two dispute updates) in one
// second of Stripe's clock share a version, but not an amount refunded (a dispute status); a
// refund object's events add its status, as refund.updated reports both a success and a
// later failure.
func ChangeKey(e Event) string {
	parts := []string{e.Provider, e.ObjectID, e.Type, strconv.FormatInt(e.ObjectVersion, 10)}
	switch {
	case e.Type == provider.EventChargeRefunded && e.Charge != nil:
		parts = append(parts, "refunded="+strconv.FormatInt(e.Charge.AmountRefunded, 10))
	case e.Dispute != nil:
		parts = append(parts, e.Dispute.ID, e.Dispute.Status)
	case e.Refund != nil:
		parts = append(parts, e.Refund.Status)
	}
	return join(parts...)
}

// join escapes each part so that no choice of ids can make two different tuples one key,
// and the key stays readable in the store.
func join(parts ...string) string {
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return strings.Join(parts, "/")
}
