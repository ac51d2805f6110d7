package dynamo

import (
	"bytes"
	"errors"
	"net/http"
	"strings"
	"testing"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"pgregory.net/rapid"

	"github.com/runtwice/twice/shared/store"
)

func TestItemRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		str := rapid.StringN(0, 20, -1)
		num := rapid.OneOf(rapid.Just(int64(0)), rapid.Int64())
		it := store.Item{
			PK:            rapid.StringN(1, 20, -1).Draw(t, "pk"),
			SK:            str.Draw(t, "sk"),
			Doc:           rapid.SliceOfN(rapid.Byte(), 0, 64).Draw(t, "doc"), // any bytes, not only UTF-8
			Version:       num.Draw(t, "ver"),
			LockExpiresAt: num.Draw(t, "lock"),
			ExpiresAt:     num.Draw(t, "exp"),
			IndexSK:       str.Draw(t, "isk"),
		}
		if it.IndexSK != "" {
			it.IndexPK = str.Draw(t, "ipk")
		}
		av, err := encodeItem(it)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeItem(av)
		if err != nil {
			t.Fatal(err)
		}
		if got.PK != it.PK || got.SK != it.SK || !bytes.Equal(got.Doc, it.Doc) || got.Version != it.Version ||
			got.LockExpiresAt != it.LockExpiresAt || got.ExpiresAt != it.ExpiresAt ||
			got.IndexPK != it.IndexPK || got.IndexSK != it.IndexSK {
			t.Fatalf("round trip\n got %+v\nwant %+v", got, it)
		}
		// Zero means absent, so the missing-attribute semantics of conditions apply.
		for name, zero := range map[string]bool{attrLock: it.LockExpiresAt == 0, attrExpires: it.ExpiresAt == 0, attrSK: it.SK == "", attrIndexPK: it.IndexPK == ""} {
			if _, present := av[name]; present == zero {
				t.Fatalf("%s present=%v for %+v", name, present, it)
			}
		}
	})
}

func TestDecodeItemCorrupt(t *testing.T) {
	cases := map[string]map[string]types.AttributeValue{
		"no pk":          {attrVersion: &types.AttributeValueMemberN{Value: "1"}},
		"pk not string":  {attrPK: &types.AttributeValueMemberN{Value: "1"}},
		"ver not number": {attrPK: &types.AttributeValueMemberS{Value: "a"}, attrVersion: &types.AttributeValueMemberS{Value: "1"}},
		"ver not int":    {attrPK: &types.AttributeValueMemberS{Value: "a"}, attrVersion: &types.AttributeValueMemberN{Value: "1.5"}},
		"doc a list":     {attrPK: &types.AttributeValueMemberS{Value: "a"}, attrDoc: &types.AttributeValueMemberL{}},
	}
	for name, av := range cases {
		if _, err := decodeItem(av); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: got %v, want ErrCorrupt", name, err)
		}
	}
}

// apiFailure wraps an API error the way the SDK returns it: in an OperationError around a
// ResponseError that carries the request id.
func apiFailure(err error) error {
	return &smithy.OperationError{ServiceID: "DynamoDB", OperationName: "PutItem", Err: &awshttp.ResponseError{
		RequestID: "REQ-ID-SECRET",
		ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: 400}},
			Err:      err,
		},
	}}
}

func TestCallErrorMapping(t *testing.T) {
	old := map[string]types.AttributeValue{attrPK: &types.AttributeValueMemberS{Value: "k"}, attrVersion: &types.AttributeValueMemberN{Value: "3"}}
	code := func(s string) *string { return &s }
	cases := []struct {
		name      string
		err       error
		want      error
		wantIndex int
		wantOld   bool
	}{
		{"condition with old", &types.ConditionalCheckFailedException{Message: code("The conditional request failed"), Item: old}, store.ErrConditionFailed, 0, true},
		{"condition without old", &types.ConditionalCheckFailedException{}, store.ErrConditionFailed, 0, false},
		{"cancelled by condition", &types.TransactionCanceledException{CancellationReasons: []types.CancellationReason{
			{Code: code("None")}, {Code: code("None")}, {Code: code("ConditionalCheckFailed"), Item: old}}}, store.ErrConditionFailed, 2, true},
		{"condition wins over conflict", &types.TransactionCanceledException{CancellationReasons: []types.CancellationReason{
			{Code: code("TransactionConflict")}, {Code: code("ConditionalCheckFailed")}}}, store.ErrConditionFailed, 1, false},
		{"cancelled by conflict", &types.TransactionCanceledException{CancellationReasons: []types.CancellationReason{
			{Code: code("None")}, {Code: code("TransactionConflict")}}}, store.ErrConflict, 0, false},
		{"cancelled by an invalid write", &types.TransactionCanceledException{CancellationReasons: []types.CancellationReason{
			{Code: code("TransactionConflict")}, {Code: code("ValidationError")}}}, store.ErrInvalid, 0, false},
		{"conflict with a transaction", &types.TransactionConflictException{Message: code("in progress")}, store.ErrConflict, 0, false},
		{"validation", &smithy.GenericAPIError{Code: "ValidationException", Message: "One or more parameter values were invalid"}, store.ErrInvalid, 0, false},
		{"throttled", &types.ProvisionedThroughputExceededException{Message: code("slow down")}, nil, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := callError("PutItem", "idempotency", apiFailure(tc.err))
			if strings.Contains(err.Error(), "REQ-ID-SECRET") {
				t.Fatalf("message leaks the request id: %s", err)
			}
			var ce *store.ConditionError
			switch {
			case tc.want == store.ErrConditionFailed:
				if !errors.As(err, &ce) || ce.Index != tc.wantIndex || (ce.Old != nil) != tc.wantOld {
					t.Fatalf("got %v, want condition error at %d (old %v)", err, tc.wantIndex, tc.wantOld)
				}
				if tc.wantOld && (ce.Old.PK != "k" || ce.Old.Version != 3) {
					t.Fatalf("old %+v", ce.Old)
				}
			case tc.want != nil:
				if !errors.Is(err, tc.want) {
					t.Fatalf("got %v, want %v", err, tc.want)
				}
			default:
				for _, s := range []error{store.ErrInvalid, store.ErrConflict, store.ErrConditionFailed, store.ErrNotFound} {
					if errors.Is(err, s) {
						t.Fatalf("%v matches %v", err, s)
					}
				}
				// The SDK error stays reachable for logging.
				var re *awshttp.ResponseError
				if !errors.As(err, &re) || re.RequestID != "REQ-ID-SECRET" {
					t.Fatalf("SDK error not reachable from %v", err)
				}
			}
		})
	}
}

func TestCursor(t *testing.T) {
	base := encodeCursor(key("p", "s"), false)
	idx := encodeCursor(map[string]types.AttributeValue{
		attrPK: &types.AttributeValueMemberS{Value: "p"}, attrSK: &types.AttributeValueMemberS{Value: "s"},
		attrIndexPK: &types.AttributeValueMemberS{Value: "open"}, attrIndexSK: &types.AttributeValueMemberS{Value: "2026"},
	}, true)
	cases := []struct {
		name   string
		cursor string
		pk     string
		index  bool
		ok     bool
	}{
		{"base", base, "p", false, true},
		{"base, other partition", base, "q", false, false},
		{"index", idx, "open", true, true},
		{"index, other partition", idx, "p", true, false},
		{"index cursor on base query", idx, "p", false, false},
		{"base cursor on index query", base, "p", true, false},
		{"not base64", "!!", "p", false, false},
		{"not json", "bm90IGpzb24", "p", false, false},
		{"extra attribute", encodeCursor(map[string]types.AttributeValue{attrPK: &types.AttributeValueMemberS{Value: "p"}, attrDoc: &types.AttributeValueMemberS{Value: "x"}}, true), "p", true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k, err := decodeCursor(tc.cursor, tc.pk, tc.index)
			if tc.ok != (err == nil) {
				t.Fatalf("got %v (%v), want ok=%v", k, err, tc.ok)
			}
			if !tc.ok && !errors.Is(err, store.ErrInvalid) {
				t.Fatalf("got %v, want ErrInvalid", err)
			}
		})
	}
}

// FuzzDecodeCursor: a cursor comes from the caller, so any string must decode or be
// ErrInvalid, and whatever decodes must re-encode to a cursor that decodes the same.
func FuzzDecodeCursor(f *testing.F) {
	f.Add(encodeCursor(key("p", "s"), false), "p", false)
	f.Add(encodeCursor(key("p", ""), false), "p", false)
	f.Add(encodeCursor(map[string]types.AttributeValue{
		attrPK: &types.AttributeValueMemberS{Value: "p"}, attrIndexPK: &types.AttributeValueMemberS{Value: "i"},
		attrIndexSK: &types.AttributeValueMemberS{Value: "j"},
	}, true), "i", true)
	f.Add("", "p", false)
	f.Add("e30", "p", false) // {}
	f.Fuzz(func(t *testing.T, cursor, pk string, index bool) {
		k, err := decodeCursor(cursor, pk, index)
		if err != nil {
			if !errors.Is(err, store.ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalid", err)
			}
			return
		}
		again, err := decodeCursor(encodeCursor(k, index), pk, index)
		if err != nil || len(again) != len(k) {
			t.Fatalf("re-encoded cursor: %v %v vs %v", err, again, k)
		}
		for n, v := range k {
			if again[n].(*types.AttributeValueMemberS).Value != v.(*types.AttributeValueMemberS).Value {
				t.Fatalf("attribute %s changed", n)
			}
		}
	})
}

// A table laid out with other attribute names round-trips every item as the default layout
// does, under those names; names must be set and distinct.
func TestAttributesLayout(t *testing.T) {
	a := newLayout(PowertoolsAttributes)
	it := store.Item{PK: "k#s#1", Doc: []byte(`{}`), Version: 3, LockExpiresAt: 9, ExpiresAt: 10}
	av, err := a.encodeItem(it)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"id", "data", "expiration", "twice_version", "twice_lock_expiration"} {
		if av[name] == nil {
			t.Errorf("no %s in %v", name, av)
		}
	}
	if av[attrPK] != nil || av[attrExpires] != nil {
		t.Errorf("default names written too: %v", av)
	}
	got, err := a.decodeItem(av)
	if err != nil || string(got.Doc) != "{}" || got.PK != it.PK || got.Version != 3 || got.LockExpiresAt != 9 || got.ExpiresAt != 10 {
		t.Fatalf("%+v %v", got, err)
	}
	bad := DefaultAttributes
	bad.Doc = bad.PK
	if bad.check() == nil {
		t.Fatal("a repeated name passed")
	}
}
