package dynamo

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runtwice/twice/shared/store"
)

var (
	_ store.Store = (*Store)(nil)
	_ Client      = (*dynamodb.Client)(nil)
)

// Client is the part of *dynamodb.Client the store calls; tests wrap it.
type Client interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

// maxTransact is DynamoDB's TransactWriteItems limit.
const maxTransact = 100

// defaultPage is the page size of a Query without a Limit, as in the store contract.
const defaultPage = 100

// maxPage bounds Limit; DynamoDB's 1 MB page holds far fewer items anyway.
const maxPage = 1 << 20

// IndexName is the secondary index every indexed table carries.
const IndexName = "gsi1"

// Store is a store.Store on DynamoDB.
type Store struct {
	client  Client
	retryer aws.Retryer        // what PutAll sends its unprocessed items again under (retryerOf)
	tables  map[string]string  // logical name -> physical table name
	attrs   map[string]*layout // logical name -> its layout, when not DefaultAttributes
}

// WithAttributes lays the items of the logical table out with attribute names a (for example
// PowertoolsAttributes, to keep twice's idempotency records in an existing Powertools table).
// Call it before the store is used. It panics on empty or repeated names: a programming error.
func (s *Store) WithAttributes(logical string, a Attributes) *Store {
	if err := a.check(); err != nil {
		panic(err)
	}
	if s.attrs == nil {
		s.attrs = map[string]*layout{}
	}
	s.attrs[logical] = newLayout(a)
	return s
}

func (s *Store) attrsOf(logical string) *layout {
	if a, ok := s.attrs[logical]; ok {
		return a
	}
	return defaultAttrs
}

// New returns a store that sends its calls through client and maps logical table names to
// physical ones through tables (for example {"idempotency": "twice-prod-idempotency"}). It makes
// no call: table existence shows on first use.
func New(client Client, tables map[string]string) *Store {
	m := make(map[string]string, len(tables))
	for logical, physical := range tables {
		m[logical] = physical
	}
	return &Store{client: client, retryer: retryerOf(client), tables: m}
}

func (s *Store) table(logical string) (string, error) {
	physical, ok := s.tables[logical]
	if !ok || physical == "" {
		return "", fmt.Errorf("%w: unknown table %q", store.ErrInvalid, logical)
	}
	return physical, nil
}

// Get implements store.Store with a strongly consistent GetItem.
func (s *Store) Get(ctx context.Context, table, pk, sk string) (store.Item, error) {
	name, err := s.table(table)
	if err != nil {
		return store.Item{}, err
	}
	if pk == "" {
		return store.Item{}, errEmptyPK
	}
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      &name,
		Key:            s.attrsOf(table).key(pk, sk),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return store.Item{}, s.callError("GetItem", table, err)
	}
	if out.Item == nil {
		return store.Item{}, store.ErrNotFound
	}
	return s.attrsOf(table).decodeItem(out.Item)
}

// Put implements store.Store with one PutItem. A failed condition returns the old item from
// the exception itself (ALL_OLD), so a duplicate costs one call and no read.
func (s *Store) Put(ctx context.Context, table string, it store.Item, c store.Cond) error {
	in, err := s.putInput(table, it, c)
	if err != nil {
		return err
	}
	if _, err := s.client.PutItem(ctx, in); err != nil {
		return s.callError("PutItem", table, err)
	}
	return nil
}

// Replace implements store.Store: one PutItem with ReturnValues ALL_OLD.
func (s *Store) Replace(ctx context.Context, table string, it store.Item, c store.Cond) (*store.Item, error) {
	in, err := s.putInput(table, it, c)
	if err != nil {
		return nil, err
	}
	in.ReturnValues = types.ReturnValueAllOld
	out, err := s.client.PutItem(ctx, in)
	if err != nil {
		return nil, s.callError("PutItem", table, err)
	}
	if len(out.Attributes) == 0 {
		return nil, nil
	}
	old, err := s.attrsOf(table).decodeItem(out.Attributes)
	if err != nil {
		return nil, err
	}
	return &old, nil
}

func (s *Store) putInput(table string, it store.Item, c store.Cond) (*dynamodb.PutItemInput, error) {
	name, err := s.table(table)
	if err != nil {
		return nil, err
	}
	a := s.attrsOf(table)
	av, err := a.encodeItem(it)
	if err != nil {
		return nil, err
	}
	ce, err := a.condition(c)
	if err != nil {
		return nil, err
	}
	in := &dynamodb.PutItemInput{
		TableName:                 &name,
		Item:                      av,
		ConditionExpression:       ce.expr,
		ExpressionAttributeNames:  ce.names,
		ExpressionAttributeValues: ce.values,
	}
	if ce.expr != nil {
		in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	}
	return in, nil
}

// Delete implements store.Store with one DeleteItem, ALL_OLD on a failed condition.
func (s *Store) Delete(ctx context.Context, table, pk, sk string, c store.Cond) error {
	name, err := s.table(table)
	if err != nil {
		return err
	}
	if pk == "" {
		return errEmptyPK
	}
	a := s.attrsOf(table)
	ce, err := a.condition(c)
	if err != nil {
		return err
	}
	in := &dynamodb.DeleteItemInput{
		TableName:                 &name,
		Key:                       a.key(pk, sk),
		ConditionExpression:       ce.expr,
		ExpressionAttributeNames:  ce.names,
		ExpressionAttributeValues: ce.values,
	}
	if ce.expr != nil {
		in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	}
	if _, err := s.client.DeleteItem(ctx, in); err != nil {
		return s.callError("DeleteItem", table, err)
	}
	return nil
}

// Transact implements store.Store with one TransactWriteItems. Malformed requests are
// rejected before any call, so an invalid transaction costs nothing.
func (s *Store) Transact(ctx context.Context, ws ...store.Write) error {
	items, err := s.transactItems(ws)
	if err != nil {
		return err
	}
	if _, err := s.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items}); err != nil {
		return callErrorOf("TransactWriteItems", "", err, func(i int) *layout {
			if i >= 0 && i < len(ws) {
				return s.attrsOf(ws[i].Table)
			}
			return defaultAttrs
		})
	}
	return nil
}

func (s *Store) transactItems(ws []store.Write) ([]types.TransactWriteItem, error) {
	if len(ws) == 0 || len(ws) > maxTransact {
		return nil, fmt.Errorf("%w: %d writes in one transaction (1 to %d)", store.ErrInvalid, len(ws), maxTransact)
	}
	type itemKey struct{ table, pk, sk string }
	seen := make(map[itemKey]bool, len(ws))
	items := make([]types.TransactWriteItem, len(ws))
	for i, w := range ws {
		if (w.Put == nil) == (w.Delete == nil) {
			return nil, fmt.Errorf("%w: write %d must have exactly one of Put and Delete", store.ErrInvalid, i)
		}
		name, err := s.table(w.Table)
		if err != nil {
			return nil, fmt.Errorf("write %d: %w", i, err)
		}
		a := s.attrsOf(w.Table)
		ce, err := a.condition(w.Cond)
		if err != nil {
			return nil, fmt.Errorf("write %d: %w", i, err)
		}
		var rv types.ReturnValuesOnConditionCheckFailure
		if ce.expr != nil {
			rv = types.ReturnValuesOnConditionCheckFailureAllOld
		}
		k := itemKey{table: name}
		if w.Put != nil {
			av, err := a.encodeItem(*w.Put)
			if err != nil {
				return nil, fmt.Errorf("write %d: %w", i, err)
			}
			k.pk, k.sk = w.Put.PK, w.Put.SK
			items[i].Put = &types.Put{
				TableName: &name, Item: av,
				ConditionExpression: ce.expr, ExpressionAttributeNames: ce.names, ExpressionAttributeValues: ce.values,
				ReturnValuesOnConditionCheckFailure: rv,
			}
		} else {
			if w.Delete.PK == "" {
				return nil, fmt.Errorf("write %d: %w", i, errEmptyPK)
			}
			k.pk, k.sk = w.Delete.PK, w.Delete.SK
			items[i].Delete = &types.Delete{
				TableName: &name, Key: a.key(k.pk, k.sk),
				ConditionExpression: ce.expr, ExpressionAttributeNames: ce.names, ExpressionAttributeValues: ce.values,
				ReturnValuesOnConditionCheckFailure: rv,
			}
		}
		if seen[k] {
			return nil, fmt.Errorf("%w: two writes to %s/%q/%q in one transaction", store.ErrInvalid, w.Table, k.pk, k.sk)
		}
		seen[k] = true
	}
	return items, nil
}

// Query implements store.Store. Base-table queries are strongly consistent; index queries
// cannot be (DynamoDB GSIs are eventually consistent).
//
// DynamoDB's Limit counts items evaluated and may leave a LastEvaluatedKey on a page that
// happened to end exactly at the last item, so the store asks for one item more than the page:
// if it arrives, there is a next page and the cursor is the key of the page's last item;
// if not, the page is the last one unless DynamoDB stopped early at its 1 MB cap.
func (s *Store) Query(ctx context.Context, q store.Query) (store.Page, error) {
	name, err := s.table(q.Table)
	if err != nil {
		return store.Page{}, err
	}
	if q.PK == "" {
		return store.Page{}, fmt.Errorf("%w: query needs a partition key", store.ErrInvalid)
	}
	if q.SKFrom != "" && q.SKTo != "" && q.SKFrom > q.SKTo {
		// DynamoDB rejects BETWEEN with bounds out of order; the range is simply empty.
		return store.Page{}, nil
	}
	limit := q.Limit
	if limit <= 0 {
		limit = defaultPage
	}
	limit = min(limit, maxPage)
	a := s.attrsOf(q.Table)
	var start map[string]types.AttributeValue
	if q.Cursor != "" {
		if start, err = a.decodeCursor(q.Cursor, q.PK, q.Index); err != nil {
			return store.Page{}, err
		}
	}
	pkAttr, skAttr := a.PK, a.SK
	if q.Index {
		pkAttr, skAttr = a.IndexPK, a.IndexSK
	}
	expr := "#pk = :pk"
	names := map[string]string{"#pk": pkAttr}
	values := map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: q.PK}}
	switch {
	case q.SKFrom != "" && q.SKTo != "":
		expr += " AND #sk BETWEEN :from AND :to"
	case q.SKFrom != "":
		expr += " AND #sk >= :from"
	case q.SKTo != "":
		expr += " AND #sk <= :to"
	}
	if q.SKFrom != "" || q.SKTo != "" {
		names["#sk"] = skAttr
	}
	if q.SKFrom != "" {
		values[":from"] = &types.AttributeValueMemberS{Value: q.SKFrom}
	}
	if q.SKTo != "" {
		values[":to"] = &types.AttributeValueMemberS{Value: q.SKTo}
	}
	in := &dynamodb.QueryInput{
		TableName:                 &name,
		KeyConditionExpression:    &expr,
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
		ScanIndexForward:          aws.Bool(!q.Desc),
		Limit:                     aws.Int32(int32(limit + 1)),
		ExclusiveStartKey:         start,
		ConsistentRead:            aws.Bool(!q.Index),
	}
	if q.Index {
		in.IndexName = aws.String(IndexName)
	}
	out, err := s.client.Query(ctx, in)
	if err != nil {
		return store.Page{}, s.callError("Query", q.Table, err)
	}
	raw := out.Items
	var page store.Page
	switch {
	case len(raw) > limit:
		raw = raw[:limit]
		page.Cursor = a.encodeCursor(raw[limit-1], q.Index)
	case len(out.LastEvaluatedKey) > 0:
		page.Cursor = a.encodeCursor(out.LastEvaluatedKey, q.Index)
	}
	page.Items = make([]store.Item, 0, len(raw))
	for _, av := range raw {
		it, err := a.decodeItem(av)
		if err != nil {
			return store.Page{}, err
		}
		page.Items = append(page.Items, it)
	}
	return page, nil
}

// errEmptyPK rejects a key DynamoDB would refuse anyway, without a round trip.
var errEmptyPK = fmt.Errorf("%w: empty partition key", store.ErrInvalid)

// ErrCorrupt means an item in the table does not have the attributes the store writes.
var ErrCorrupt = errors.New("dynamo: item does not decode")
