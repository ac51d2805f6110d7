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

// key is the primary key of an item: pk alone in a table without a sort key.
func key(pk, sk string) map[string]types.AttributeValue {
	k := map[string]types.AttributeValue{attrPK: &types.AttributeValueMemberS{Value: pk}}
	if sk != "" {
		k[attrSK] = &types.AttributeValueMemberS{Value: sk}
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
func encodeItem(it store.Item) (map[string]types.AttributeValue, error) {
	if it.PK == "" {
		return nil, errEmptyPK
	}
	if it.IndexPK != "" && it.IndexSK == "" {
		// DynamoDB refuses an empty index key, and leaving gsi1sk out would drop the item from
		// the index without a word.
		return nil, fmt.Errorf("%w: item %q/%q has IndexPK but no IndexSK", store.ErrInvalid, it.PK, it.SK)
	}
	av := key(it.PK, it.SK)
	if len(it.Doc) > 0 {
		av[attrDoc] = &types.AttributeValueMemberB{Value: it.Doc}
	}
	av[attrVersion] = number(it.Version)
	if it.LockExpiresAt != 0 {
		av[attrLock] = number(it.LockExpiresAt)
	}
	if it.ExpiresAt != 0 {
		av[attrExpires] = number(it.ExpiresAt)
	}
	if it.IndexPK != "" {
		av[attrIndexPK] = &types.AttributeValueMemberS{Value: it.IndexPK}
	}
	if it.IndexSK != "" {
		av[attrIndexSK] = &types.AttributeValueMemberS{Value: it.IndexSK}
	}
	return av, nil
}

func number(n int64) *types.AttributeValueMemberN {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// decodeItem reads an item as encodeItem wrote it. It also accepts doc as a string, so an item
// edited by hand in the console still reads.
func decodeItem(av map[string]types.AttributeValue) (store.Item, error) {
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
	str(attrPK, &it.PK)
	str(attrSK, &it.SK)
	str(attrIndexPK, &it.IndexPK)
	str(attrIndexSK, &it.IndexSK)
	num(attrVersion, &it.Version)
	num(attrLock, &it.LockExpiresAt)
	num(attrExpires, &it.ExpiresAt)
	switch v := av[attrDoc].(type) {
	case nil:
	case *types.AttributeValueMemberB:
		it.Doc = v.Value
	case *types.AttributeValueMemberS:
		it.Doc = []byte(v.Value)
	default:
		err = fmt.Errorf("%w: %s is %T", ErrCorrupt, attrDoc, v)
	}
	if err == nil && it.PK == "" {
		err = fmt.Errorf("%w: no %s", ErrCorrupt, attrPK)
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
func condition(c store.Cond) (condExpr, error) {
	pk := map[string]string{"#pk": attrPK}
	switch c.Kind {
	case store.Always:
		return condExpr{}, nil
	case store.NotExists:
		return condExpr{expr: aws.String("attribute_not_exists(#pk)"), names: pk}, nil
	case store.Exists:
		return condExpr{expr: aws.String("attribute_exists(#pk)"), names: pk}, nil
	case store.NotExistsOrLapsed:
		return condExpr{
			expr:   aws.String("attribute_not_exists(#pk) OR #lock < :now OR #exp < :now"),
			names:  map[string]string{"#pk": attrPK, "#lock": attrLock, "#exp": attrExpires},
			values: map[string]types.AttributeValue{":now": number(c.Now)},
		}, nil
	case store.VersionBelow:
		return condExpr{
			expr:   aws.String("attribute_not_exists(#pk) OR #ver < :v"),
			names:  map[string]string{"#pk": attrPK, "#ver": attrVersion},
			values: map[string]types.AttributeValue{":v": number(c.Version)},
		}, nil
	case store.VersionIs:
		return condExpr{
			expr:   aws.String("#ver = :v"),
			names:  map[string]string{"#ver": attrVersion},
			values: map[string]types.AttributeValue{":v": number(c.Version)},
		}, nil
	default:
		return condExpr{}, fmt.Errorf("%w: unknown condition kind %d", store.ErrInvalid, c.Kind)
	}
}

// A cursor is the ExclusiveStartKey of the next page: the key attributes (all strings) as a
// JSON object, base64url without padding. It is opaque to callers but not secret.
func encodeCursor(av map[string]types.AttributeValue, index bool) string {
	names := []string{attrPK, attrSK}
	if index {
		names = append(names, attrIndexPK, attrIndexSK)
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
func decodeCursor(cursor, pk string, index bool) (map[string]types.AttributeValue, error) {
	bad := fmt.Errorf("%w: bad cursor", store.ErrInvalid)
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return nil, bad
	}
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, bad
	}
	allowed := map[string]bool{attrPK: true, attrSK: true, attrIndexPK: index, attrIndexSK: index}
	for n, v := range m {
		if !allowed[n] || v == "" {
			return nil, bad
		}
	}
	if m[attrPK] == "" {
		return nil, bad
	}
	partition := attrPK
	if index {
		partition = attrIndexPK
		if m[attrIndexSK] == "" {
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
