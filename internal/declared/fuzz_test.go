package declared

import (
	"os"
	"strings"
	"testing"
)

// FuzzParse: any poller.json either parses into a spec that builds a poller, or fails with an
// error that says where (a field, a line, or the file as a whole); never a panic.
func FuzzParse(f *testing.F) {
	ex, err := os.ReadFile("../../orders-queue/poller.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(ex)
	f.Add([]byte(good))
	f.Add([]byte(`{"source":{"table":"t","columns":["a","a"],"key":["a"],"cursor":{"kind":"xid","column":"x"}},"sink":{"type":"eventhubs","connection":"E","hub":"h"}}`))
	f.Add([]byte(`{"source":null,"sink":{"type":"servicebus","connection":"B","queue":"q","topic":"t"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		spec, err := Parse(data)
		if err != nil {
			if strings.TrimSpace(err.Error()) == "" {
				t.Fatal("an empty error")
			}
			return
		}
		if _, err := spec.Poller("fuzzed"); err != nil {
			t.Fatalf("a spec that parsed does not build: %v\n%s", err, data)
		}
	})
}
