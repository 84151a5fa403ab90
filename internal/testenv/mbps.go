package testenv

import (
	"encoding/json"
	"testing"
)

// JSONBytesPerRow is the size of a row in the benchmarks' MB/s: the JSON a batch of rows encodes
// to (row.Batch's MarshalJSON, the array of one object per row that a webhook or a queue
// message carries, without the envelope) divided by its rows. sample is such a batch of rows
// rows, read outside the timed part.
func JSONBytesPerRow(tb testing.TB, sample json.Marshaler, rows int) float64 {
	tb.Helper()
	if rows == 0 {
		tb.Fatal("JSONBytesPerRow: an empty sample")
	}
	data, err := json.Marshal(sample)
	if err != nil {
		tb.Fatalf("JSONBytesPerRow: %v", err)
	}
	return float64(len(data)) / float64(rows)
}

// ReportMB reports, for each name and its rows/s, the metric name-MB/s: rows/s times bytesPerRow
// (JSONBytesPerRow) in millions of bytes a second; and bytesPerRow itself as json-bytes/row.
func ReportMB(b *testing.B, bytesPerRow float64, rowsPerSec map[string]float64) {
	for name, r := range rowsPerSec {
		b.ReportMetric(r*bytesPerRow/1e6, name+"-MB/s")
	}
	b.ReportMetric(bytesPerRow, "json-bytes/row")
}
