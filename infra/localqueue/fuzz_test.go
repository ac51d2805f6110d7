package localqueue

import (
	"maps"
	"testing"
)

// FuzzParseReceipt: receipt handles come back from consumers and operators.
func FuzzParseReceipt(f *testing.F) {
	f.Add(receipt{tag: nameTag("webhooks"), seq: 1, count: 1}.String())
	f.Add(receipt{tag: 0xffffffff, seq: 1 << 62, count: 1000}.String())
	f.Add("")
	f.Add("not-a-receipt")
	f.Add("AQAAAAAB")
	f.Fuzz(func(t *testing.T, s string) {
		r, err := parseReceipt(s)
		if err != nil {
			return
		}
		again, err := parseReceipt(r.String())
		if err != nil || again != r {
			t.Fatalf("%q parsed to %+v, which does not round-trip: %+v, %v", s, r, again, err)
		}
	})
}

// FuzzDecodeRecord: records are read back from a file that a crash or another program may have
// left in any state.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(record{id: "m1", body: []byte(`{"a":1}`), attrs: map[string]string{"k": "v"}, sentAt: 1, visibleAt: 2, receiveCount: 3}.encode())
	f.Add(record{id: "m2", body: []byte("x")}.encode())
	f.Add([]byte{1})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeRecord(b)
		if err != nil {
			return
		}
		again, err := decodeRecord(r.encode())
		if err != nil || again.id != r.id || string(again.body) != string(r.body) || !maps.Equal(again.attrs, r.attrs) ||
			again.sentAt != r.sentAt || again.visibleAt != r.visibleAt || again.receiveCount != r.receiveCount {
			t.Fatalf("record %+v does not round-trip: %+v, %v", r, again, err)
		}
	})
}
