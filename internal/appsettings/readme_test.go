package appsettings

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestReadmeTable: the poller settings table of the documentation (docs/contract.md, "App
// settings") is Table's rows, in its order, word for word.
func TestReadmeTable(t *testing.T) {
	readme, err := os.ReadFile("../../docs/contract.md")
	if err != nil {
		t.Fatal(err)
	}
	var got, want []string
	for _, line := range strings.Split(string(readme), "\n") {
		if strings.HasPrefix(line, "| `{P}_") {
			got = append(got, line)
		}
	}
	for _, s := range Table {
		want = append(want, fmt.Sprintf("| `{P}_%s` | %s | %s |", s.Suffix, s.Meaning, s.Default))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("docs/contract.md's poller settings differ from appsettings.Table; its rows should be:\n%s", strings.Join(want, "\n"))
	}
}
