// Package redacttest states, independently of the engine, what must not survive redaction: the
// checks the redaction fuzz targets (shared/redact's and the attempt log's FuzzRecordNoLeak)
// hold their output to, and the seeds they start from.
//
//	out := redact.Text(in)
//	redacttest.Check(t, "Text", out)
package redacttest
