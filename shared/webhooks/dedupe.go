package webhooks

import (
	"net/url"
	"strconv"
	"strings"
)

// EventKey is the first dedupe key: the provider's event id.
func EventKey(e Event) string {
	return join(e.Provider, e.ID)
}

// ChangeKey is the second dedupe key, (object id, event type, object version): a provider can
// send two Event objects with different ids for one change, and this key is equal for both.
func ChangeKey(e Event) string {
	return join(e.Provider, e.ObjectID, e.Type, strconv.FormatInt(e.ObjectVersion, 10))
}

// join escapes each part so that no choice of ids can make two different tuples one key,
// and the key stays readable in the store.
func join(parts ...string) string {
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return strings.Join(parts, "/")
}
