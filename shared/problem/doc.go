// Package problem writes RFC 9457 problem details (application/problem+json), the one error
// shape every twice HTTP surface answers with. A handler names a problem code and a short,
// caller-safe detail; the code's status comes from the one table of codes (statuses), so no
// call site picks a status of its own, and internal error text never goes into a problem:
//
//	problem.Write(w, problem.New(problem.NotFound, "No payment has this id."))
//
// Each surface maps its errors to codes in one place (payments' problemOf, the operator API's
// problemOf) and its outermost handler alone writes the answer.
package problem
