package declared_test

import (
	"fmt"

	"github.com/pseudotrigger/pseudotrigger/internal/declared"
)

// Parse reads a poller.json strictly and says what is wrong with it, naming the field as the
// file spells it: the handler, the status page and pollerctl show these errors for that poller
// alone. (pollertest's Example_declared runs a good one through a tick.)
func ExampleParse() {
	for _, pollerJSON := range []string{
		`{"source": {"tabel": "orders"}}`,
		`{"source": {"table": "orders", "columns": ["id", "updated_at"], "key": ["id"],
		             "cursor": {"kind": "timestamp", "column": "updated_at"}},
		  "sink": {"type": "webhook", "url": "%HOOK_URL%"}}`,
		`{"source": {"table": "orders", "columns": ["id", "updated_at"], "key": ["id"],
		             "cursor": {"kind": "timestamp+pk", "column": "updated_at"}},
		  "sink": {"type": "storagequeue", "connection": "ChangesQueue", "hub": "orders"}}`,
	} {
		_, err := declared.Parse([]byte(pollerJSON))
		fmt.Println(err)
	}
	// Output:
	// source.tabel is not a field of poller.json (did you mean source.table?); poller.schema.json describes the fields
	// source.cursor.kind: "timestamp" is not one of timestamp+pk, integer, rowversion, xid, logical, changetracking
	// sink.hub: is not an option of a storagequeue sink (its options: connection, queue, encoding, message_ttl)
}
