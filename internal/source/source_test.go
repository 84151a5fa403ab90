package source_test

import (
	"database/sql"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcetest"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

func TestConformancePostgres(t *testing.T) {
	dsn := testenv.Postgres(t)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	sourcetest.Run(t, sourcetest.Harness{Driver: source.Postgres, DSN: dsn, DB: db, ConcurrentWriters: true})
}
