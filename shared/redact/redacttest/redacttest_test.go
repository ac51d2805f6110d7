package redacttest

import "testing"

func TestLeakedCardChecker(t *testing.T) {
	// The checker must find what it is meant to, or the fuzz targets prove nothing.
	for _, s := range []string{"4242424242424242", "x 4242 4242 4242 4242 y", "1 4242-4242-4242-4242"} {
		if LeakedCard(s) == "" {
			t.Errorf("checker missed the card in %q", s)
		}
	}
	if c := LeakedCard("12345678901234567890"); c != "" {
		t.Errorf("checker flagged %q", c)
	}
}
