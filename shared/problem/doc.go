// Package problem writes RFC 9457 problem details (application/problem+json), the one error
// shape every twice HTTP surface answers with. Handlers decide the status and a short,
// caller-safe title and detail; internal error text never goes into a problem.
package problem
