// Package metrics writes CloudWatch metrics as Embedded Metric Format (EMF) log lines: the
// function's log stream is the transport and CloudWatch Logs extracts the metrics, so a
// metric costs no API call, no client and nothing at INIT.
//
// Every line carries the Stage dimension (dev and prod never merge into one series) and a
// "level" field. With the JSON log format Lambda filters application logs by that field and
// treats a line without one as INFO, so a metric line without a level disappears as soon as
// someone raises ApplicationLogLevel to WARN, and the alarms watching it go quiet. Metric
// lines are written at Level (WARN): the highest filter the template allows (a test in
// infra/rie holds every function's ApplicationLogLevel at or below it).
//
//	emf := &metrics.EMF{W: os.Stdout, Namespace: "Twice", Stage: "prod"}
//	emf.Put(time.Now(), nil, nil, metrics.Value{Name: "DeadLetterOpen", Unit: metrics.Count, V: 3})
package metrics
