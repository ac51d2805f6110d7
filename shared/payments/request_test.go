package payments

import "testing"

func TestDuplicateName(t *testing.T) {
	for body, want := range map[string]string{
		`{"amount":2000,"currency":"usd","amount":1}`: "amount",
		`{"m":{"k":"1","k":"2"}}`:                     "k",
		`{"a":{"x":1},"a":2}`:                         "a",
		`{"a":[{"b":1},{"b":2}],"c":{"b":3}}`:         "",
		`{"a":[1,"a",{"a":"a"}],"b":"a"}`:             "",
		`{"amount":1`:                                 "",
		`[{"a":1,"a":2}]`:                             "a",
	} {
		got, dup := duplicateName([]byte(body))
		if got != want || dup != (want != "") {
			t.Errorf("%s: %q %v, want %q", body, got, dup, want)
		}
	}
}
