package source_test

import (
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcetest"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// TestChangeTrackingSQLServer runs the changetracking cursor's conformance suite against the SQL
// Server of MSSQL_TEST_DSN (skipped without it; .github/workflows/ci.yml's SQL Server job sets it).
func TestChangeTrackingSQLServer(t *testing.T) {
	sourcetest.ChangeTracking(t, testenv.SQLServer(t))
}
