// Package dynamo is the DynamoDB store.Store: the one the deployed functions use. It passes
// the same contract suite (shared/store/storetest) as the embedded shared/boltstore, run
// against DynamoDB Local.
//
// # Layout
//
// Each logical table ("idempotency", "payments", ...) maps to a physical table through the map
// given to New. An item is stored as:
//
//	pk               S  partition key
//	sk               S  sort key, only in tables that have one (an item with empty SK goes to a pk-only table)
//	doc              B  the JSON document, byte for byte
//	ver              N  always present, so version conditions compare against a number
//	lock_expires_at  N  omitted when 0
//	expires_at       N  the TTL attribute; omitted when 0
//	gsi1pk, gsi1sk   S  the "gsi1" index key (projection ALL); omitted when empty
//
// Those are DefaultAttributes. Store.WithAttributes gives one logical table other names
// (Attributes), so a table made by another tool can be used: PowertoolsAttributes keeps
// twice's idempotency records in a Powertools idempotency table (key id, TTL expiration,
// document data), beside Powertools' own records.
//
// doc is binary rather than a string: the store never interprets it, and B round-trips every
// byte where S requires valid UTF-8 (the SDK would silently replace invalid bytes). The price
// is that the console shows base64.
//
// # Cost of each call
//
// Put and Delete are one request each. A failed condition asks DynamoDB for the item as it was
// (ReturnValuesOnConditionCheckFailure = ALL_OLD) and returns it in *store.ConditionError, so
// a duplicate idempotency key costs one PutItem and no read. Transact is one
// TransactWriteItems with ALL_OLD on each conditional write; an invalid transaction (empty,
// over 100 writes, two writes on one key, empty key) is rejected before any request.
// CallCounter proves these costs in tests.
//
// # Conditions
//
//	NotExists          attribute_not_exists(pk)
//	Exists             attribute_exists(pk)
//	NotExistsOrLapsed  attribute_not_exists(pk) OR lock_expires_at < :now OR expires_at < :now
//	VersionBelow       attribute_not_exists(pk) OR ver < :v
//	VersionIs          ver = :v
//
// A comparison with a missing attribute is false in DynamoDB, so an item written without a
// lock or a TTL (zero, hence omitted) never counts as lapsed: the same as store.Cond.Holds,
// which a property test checks against DynamoDB Local.
//
// # Queries
//
// Base-table queries are strongly consistent; gsi1 queries are eventually consistent in AWS.
// The store asks DynamoDB for one item more than the page, so a page never exceeds Limit and
// the last page has no cursor; a page that DynamoDB cut at its 1 MB cap is shorter and carries
// a cursor. The cursor is the next start key as base64url JSON, checked against the query's
// partition.
//
// # Errors
//
// Errors wrap the store sentinels: a DynamoDB ValidationException is store.ErrInvalid, a
// TransactionConflict store.ErrConflict. *CallError messages carry DynamoDB's code and
// message but never the request id; errors.As reaches the SDK error for logging.
//
// A Put with a SK into a pk-only table cannot be caught by DynamoDB (sk becomes a plain
// attribute); reads with that SK are refused as ErrInvalid. Callers never mix the two.
//
// # Clients
//
// Production code builds its *dynamodb.Client from lambdaenv.AWS (the environment) in main and passes
// it to New, which makes no call. NewClient builds one for DynamoDB Local (tests, local
// tooling), and CreateTable/DeleteTable manage tables there.
package dynamo
