package main

import (
	"math"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestUnits(t *testing.T) {
	writes := []struct {
		name string
		w    Write
		want float64
	}{
		{"small item is one unit", Write{Bytes: 300}, 1},
		{"exactly 1 KiB", Write{Bytes: 1024}, 1},
		{"one byte over 1 KiB", Write{Bytes: 1025}, 2},
		{"transaction doubles", Write{Bytes: 300, Transactional: true}, 2},
		{"empty item still one unit", Write{}, 1},
	}
	for _, tc := range writes {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.w.WRU(); got != tc.want {
				t.Fatalf("WRU = %v, want %v", got, tc.want)
			}
		})
	}
	reads := []struct {
		name string
		r    Read
		want float64
	}{
		{"consistent small read", Read{Bytes: 700, Consistent: true}, 1},
		{"eventually consistent is half", Read{Bytes: 700}, 0.5},
		{"over 4 KiB", Read{Bytes: 4097, Consistent: true}, 2},
	}
	for _, tc := range reads {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.r.RRU(); got != tc.want {
				t.Fatalf("RRU = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCallUnits(t *testing.T) {
	cases := []struct {
		name     string
		calls    map[string]float64
		bytes    float64
		tx       int
		wru, rru float64
	}{
		{"twice new key: put plus a one-item transaction", map[string]float64{"PutItem": 1, "TransactWriteItems": 1}, 721, 1, 3, 0},
		{"Powertools new key: put plus update", map[string]float64{"PutItem": 1, "UpdateItem": 1}, 365, 1, 2, 0},
		{"replay reading after a failed put", map[string]float64{"PutItem": 1, "GetItem": 1}, 365, 1, 1, 1},
		{"transaction of three items", map[string]float64{"TransactWriteItems": 1}, 100, 3, 6, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wru, rru := callUnits(tc.calls, tc.bytes, tc.tx)
			if wru != tc.wru || rru != tc.rru {
				t.Fatalf("got %v WRU %v RRU, want %v, %v", wru, rru, tc.wru, tc.rru)
			}
		})
	}
}

func TestPercentile(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3, 6, 7, 8, 9, 10}
	cases := []struct {
		name string
		p    float64
		want float64
	}{
		{"p50 nearest rank", 50, 5},
		{"p99 is the max of ten", 99, 10},
		{"p10", 10, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := percentile(xs, tc.p); got != tc.want {
				t.Fatalf("p%v = %v, want %v", tc.p, got, tc.want)
			}
		})
	}
	if percentile(nil, 50) != 0 {
		t.Fatal("empty input")
	}
}

func TestItemSize(t *testing.T) {
	item := map[string]types.AttributeValue{
		"pk":  &types.AttributeValueMemberS{Value: "abc"},     // 2 + 3
		"n":   &types.AttributeValueMemberN{Value: "1234"},    // 1 + 3
		"doc": &types.AttributeValueMemberB{Value: []byte{1}}, // 3 + 1
		"ok":  &types.AttributeValueMemberBOOL{Value: true},   // 2 + 1
	}
	if got := itemSize(item); got != 16 {
		t.Fatalf("itemSize = %d, want 16", got)
	}
}

func TestParseSide(t *testing.T) {
	good := `{"implementation":"x","version":"2.35.0","phases":[
		{"kind":"new","requests":2,"calls":{"PutItem":2,"UpdateItem":2},"latencies_ms":[1,2]},
		{"kind":"replay","requests":1,"calls":{"PutItem":1},"latencies_ms":[1]},
		{"kind":"in_progress","requests":1,"calls":{"PutItem":1},"latencies_ms":[1]}]}`
	run, err := parseSide([]byte(good))
	if err != nil || run.Version != "2.35.0" || phaseOf(run, kindNew).Calls["UpdateItem"] != 2 {
		t.Fatalf("parseSide = %+v, %v", run, err)
	}
	bad := []struct{ name, in string }{
		{"not JSON", "warning: something\n{}"},
		{"latencies missing", `{"phases":[{"kind":"new","requests":2,"latencies_ms":[1]},{"kind":"replay"},{"kind":"in_progress"}]}`},
		{"a phase missing", `{"phases":[{"kind":"new","requests":0,"latencies_ms":[]}]}`},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := parseSide([]byte(tc.in)); err == nil {
				t.Fatal("no error")
			}
		})
	}
}
