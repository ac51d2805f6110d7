package dynamo

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runtwice/twice/shared/store"
)

// Attribute names. Expressions refer to them through #placeholders, so none of them can ever
// collide with a DynamoDB reserved word.
const (
	attrPK      = "pk"
	attrSK      = "sk"
	attrDoc     = "doc"
	attrVersion = "ver"
	attrLock    = "lock_expires_at"
	attrExpires = "expires_at" // the table's TTL attribute
	attrIndexPK = "gsi1pk"
	attrIndexSK = "gsi1sk"
)

// Attributes names the attributes of one table's items, so a table laid out by another tool
// can be used: DefaultAttributes is the layout CreateTable makes and template.yaml declares;
// PowertoolsAttributes reuses a table made for Powertools for AWS Lambda's idempotency
// utility (partition key id, TTL attribute expiration). Set them with Store.WithAttributes.
type Attributes struct {
	PK, SK           string // the key attributes (S)
	Doc              string // the document (B)
	Version          string // the version (N)
	Lock             string // the lock expiry, unix seconds (N)
	Expires          string // the TTL attribute, unix seconds (N)
	IndexPK, IndexSK string // the gsi1 key (S)
}

// DefaultAttributes is the layout of every table twice creates.
var DefaultAttributes = Attributes{PK: attrPK, SK: attrSK, Doc: attrDoc, Version: attrVersion, Lock: attrLock,
	Expires: attrExpires, IndexPK: attrIndexPK, IndexSK: attrIndexSK}

// PowertoolsAttributes lays twice's records into a Powertools idempotency table: its key
// attribute id and its TTL attribute expiration (both unix-second numbers, as there), the
// document in data. twice's lock and version keep attributes of their own, which Powertools
// never reads; a Powertools record (key "function#hash") and a twice record ("k#scope#key")
// never share a key, so both can use the table at once.
var PowertoolsAttributes = Attributes{PK: "id", SK: "sk", Doc: "data", Version: "twice_version", Lock: "twice_lock_expiration",
	Expires: "expiration", IndexPK: attrIndexPK, IndexSK: attrIndexSK}

// check refuses an empty or repeated attribute name.
func (a Attributes) check() error {
	seen := map[string]bool{}
	for _, n := range []string{a.PK, a.SK, a.Doc, a.Version, a.Lock, a.Expires, a.IndexPK, a.IndexSK} {
		if n == "" || seen[n] {
			return fmt.Errorf("%w: attribute names must be set and distinct: %+v", store.ErrInvalid, a)
		}
		seen[n] = true
	}
	return nil
}

// layout is a table's Attributes with the condition expressions built once: a call then
// allocates only its values.
type layout struct {
	Attributes
	conds map[store.CondKind]condExpr // expression and names, without values
}

func newLayout(a Attributes) *layout {
	l := &layout{Attributes: a, conds: map[store.CondKind]condExpr{
		store.NotExists: {expr: aws.String("attribute_not_exists(#pk)"), names: map[string]string{"#pk": a.PK}},
		store.Exists:    {expr: aws.String("attribute_exists(#pk)"), names: map[string]string{"#pk": a.PK}},
		store.NotExistsOrLapsed: {expr: aws.String("attribute_not_exists(#pk) OR #lock < :now OR #exp < :now"),
			names: map[string]string{"#pk": a.PK, "#lock": a.Lock, "#exp": a.Expires}},
		store.VersionBelow: {expr: aws.String("attribute_not_exists(#pk) OR #ver < :v"),
			names: map[string]string{"#pk": a.PK, "#ver": a.Version}},
		store.VersionIs: {expr: aws.String("#ver = :v"), names: map[string]string{"#ver": a.Version}},
	}}
	return l
}

var defaultAttrs = newLayout(DefaultAttributes)

// The layout functions of the default attributes.
func key(pk, sk string) map[string]types.AttributeValue { return defaultAttrs.key(pk, sk) }
func encodeItem(it store.Item) (map[string]types.AttributeValue, error) {
	return defaultAttrs.encodeItem(it)
}
func decodeItem(av map[string]types.AttributeValue) (store.Item, error) {
	return defaultAttrs.decodeItem(av)
}
func encodeCursor(av map[string]types.AttributeValue, index bool) string {
	return defaultAttrs.encodeCursor(av, index)
}
func decodeCursor(cursor, pk string, index bool) (map[string]types.AttributeValue, error) {
	return defaultAttrs.decodeCursor(cursor, pk, index)
}

// key is the primary key of an item: pk alone in a table without a sort key.
func (a *layout) key(pk, sk string) map[string]types.AttributeValue {
	k := map[string]types.AttributeValue{a.PK: &types.AttributeValueMemberS{Value: pk}}
	if sk != "" {
		k[a.SK] = &types.AttributeValueMemberS{Value: sk}
	}
	return k
}

// encodeItem lays an item out as attributes. Doc is binary (B), not a string: the store never
// interprets it, and a Go string that is not valid UTF-8 would be silently rewritten by the
// SDK's JSON encoder (U+FFFD) or refused by DynamoDB, while B round-trips every byte. The
// console shows it as base64; the JSON is one decode away.
//
// Zero numbers and empty strings are left out: DynamoDB refuses empty key attributes, and a
// missing lock_expires_at or expires_at makes `< :now` false, which is exactly what the
// contract's "zero means none" needs. ver is always written, so version conditions compare
// against a number.
func (a *layout) encodeItem(it store.Item) (map[string]types.AttributeValue, error) {
	if it.PK == "" {
		return nil, errEmptyPK
	}
	if it.IndexPK != "" && it.IndexSK == "" {
		// DynamoDB refuses an empty index key, and leaving gsi1sk out would drop the item from
		// the index without a word.
		return nil, fmt.Errorf("%w: item %q/%q has IndexPK but no IndexSK", store.ErrInvalid, it.PK, it.SK)
	}
	av := a.key(it.PK, it.SK)
	if len(it.Doc) > 0 {
		av[a.Doc] = &types.AttributeValueMemberB{Value: it.Doc}
	}
	av[a.Version] = number(it.Version)
	if it.LockExpiresAt != 0 {
		av[a.Lock] = number(it.LockExpiresAt)
	}
	if it.ExpiresAt != 0 {
		av[a.Expires] = number(it.ExpiresAt)
	}
	if it.IndexPK != "" {
		av[a.IndexPK] = &types.AttributeValueMemberS{Value: it.IndexPK}
	}
	if it.IndexSK != "" {
		av[a.IndexSK] = &types.AttributeValueMemberS{Value: it.IndexSK}
	}
	return av, nil
}

func number(n int64) *types.AttributeValueMemberN {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// decodeItem reads an item as encodeItem wrote it. It also accepts doc as a string, so an item
// edited by hand in the console still reads.
func (a *layout) decodeItem(av map[string]types.AttributeValue) (store.Item, error) {
	var it store.Item
	var err error
	str := func(name string, dst *string) {
		switch v := av[name].(type) {
		case nil:
		case *types.AttributeValueMemberS:
			*dst = v.Value
		default:
			err = fmt.Errorf("%w: %s is %T", ErrCorrupt, name, v)
		}
	}
	num := func(name string, dst *int64) {
		switch v := av[name].(type) {
		case nil:
		case *types.AttributeValueMemberN:
			n, perr := strconv.ParseInt(v.Value, 10, 64)
			if perr != nil {
				err = fmt.Errorf("%w: %s is %q", ErrCorrupt, name, v.Value)
			}
			*dst = n
		default:
			err = fmt.Errorf("%w: %s is %T", ErrCorrupt, name, v)
		}
	}
	str(a.PK, &it.PK)
	str(a.SK, &it.SK)
	str(a.IndexPK, &it.IndexPK)
	str(a.IndexSK, &it.IndexSK)
	num(a.Version, &it.Version)
	num(a.Lock, &it.LockExpiresAt)
	num(a.Expires, &it.ExpiresAt)
	switch v := av[a.Doc].(type) {
	case nil:
	case *types.AttributeValueMemberB:
		it.Doc = v.Value
	case *types.AttributeValueMemberS:
		it.Doc = []byte(v.Value)
	default:
		err = fmt.Errorf("%w: %s is %T", ErrCorrupt, a.Doc, v)
	}
	if err == nil && it.PK == "" {
		err = fmt.Errorf("%w: no %s", ErrCorrupt, a.PK)
	}
	if err != nil {
		return store.Item{}, err
	}
	return it, nil
}

// condExpr is a condition expression with its placeholders; all nil for store.Always.
type condExpr struct {
	expr   *string
	names  map[string]string
	values map[string]types.AttributeValue
}

// condition maps a store condition to a DynamoDB condition expression. A comparison with a
// missing attribute is false in DynamoDB, so an item without a lock (lock_expires_at left out)
// never counts as lapsed through `#lock < :now`: the same as store.Cond.Holds.
func (a *layout) condition(c store.Cond) (condExpr, error) {
	// The expression and the names are shared by every call (the SDK only reads them); the
	// values are the call's own.
	switch c.Kind {
	case store.Always:
		return condExpr{}, nil
	case store.NotExists, store.Exists:
		return a.conds[c.Kind], nil
	case store.NotExistsOrLapsed:
		ce := a.conds[c.Kind]
		ce.values = map[string]types.AttributeValue{":now": number(c.Now)}
		return ce, nil
	case store.VersionBelow, store.VersionIs:
		ce := a.conds[c.Kind]
		ce.values = map[string]types.AttributeValue{":v": number(c.Version)}
		return ce, nil
	default:
		return condExpr{}, fmt.Errorf("%w: unknown condition kind %d", store.ErrInvalid, c.Kind)
	}
}

// A cursor is the ExclusiveStartKey of the next page: the key attributes (all strings) as a
// JSON object, base64url without padding. It is opaque to callers but not secret.
func (a *layout) encodeCursor(av map[string]types.AttributeValue, index bool) string {
	names := []string{a.PK, a.SK}
	if index {
		names = append(names, a.IndexPK, a.IndexSK)
	}
	m := make(map[string]string, len(names))
	for _, n := range names {
		if v, ok := av[n].(*types.AttributeValueMemberS); ok {
			m[n] = v.Value
		}
	}
	b, _ := json.Marshal(m) // a map of strings always marshals
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor parses a caller's cursor and checks that it continues a query of partition pk
// (of the index when index is set), so a cursor from another query is ErrInvalid rather than a
// DynamoDB validation error.
func (a *layout) decodeCursor(cursor, pk string, index bool) (map[string]types.AttributeValue, error) {
	bad := fmt.Errorf("%w: bad cursor", store.ErrInvalid)
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return nil, bad
	}
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, bad
	}
	allowed := map[string]bool{a.PK: true, a.SK: true, a.IndexPK: index, a.IndexSK: index}
	for n, v := range m {
		if !allowed[n] || v == "" {
			return nil, bad
		}
	}
	if m[a.PK] == "" {
		return nil, bad
	}
	partition := a.PK
	if index {
		partition = a.IndexPK
		if m[a.IndexSK] == "" {
			return nil, bad
		}
	}
	if m[partition] != pk {
		return nil, bad
	}
	av := make(map[string]types.AttributeValue, len(m))
	for n, v := range m {
		av[n] = &types.AttributeValueMemberS{Value: v}
	}
	return av, nil
}
