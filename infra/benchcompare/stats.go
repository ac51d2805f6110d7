package main

import (
	"maps"
	"slices"
)

// percentile returns the nearest-rank p-th percentile (0 < p <= 100) of xs, 0 for none.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	rank := int(p/100*float64(len(s)) + 0.999999999)
	return s[min(max(rank, 1), len(s))-1]
}

// perRequest divides each call count by the number of requests.
func perRequest(calls map[string]int, requests int) map[string]float64 {
	out := make(map[string]float64, len(calls))
	for op, n := range calls {
		if requests > 0 {
			out[op] = float64(n) / float64(requests)
		}
	}
	return out
}

// ops returns the operation names of calls, sorted.
func ops(calls map[string]int) []string {
	return slices.Sorted(maps.Keys(calls))
}
