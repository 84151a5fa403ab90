package sqlserver

import (
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
)

// BuildCTQueries renders the changetracking cursor's SQL, for its golden test: with the column
// mask and the commit time read when columns and commitTime are set, and skip's changes left out.
func BuildCTQueries(dl driver.Driver, t sourcedef.Table, cols, keys []string, columns, commitTime bool, skip string) ctQueries {
	return buildCTQueries(dl, t, cols, keys, func(_ int, m string) string { return m }, ctOptions{columns: columns, commitTime: commitTime, skip: skip})
}
