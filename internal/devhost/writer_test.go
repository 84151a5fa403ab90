package devhost

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

func TestCreateOrdersForUnknownDriver(t *testing.T) {
	if err := CreateOrdersFor(context.Background(), nil, "oracle"); err == nil || !strings.Contains(err.Error(), "mysql") {
		t.Fatalf("an unknown driver: %v", err)
	}
}

// TestWriterMySQL: scripts/dev.sh's MySQL mode. The writer makes the orders table in a database
// of its own on the test server (MariaDB or MySQL) and writes UTC DATETIME(6) stamps that the
// table's (updated_at, id) order follows.
func TestWriterMySQL(t *testing.T) {
	adminDSN := testenv.MySQL(t)
	cfg, err := mysql.ParseDSN(adminDSN)
	if err != nil {
		t.Fatal(err)
	}
	admin := testenv.DB(t, "mysql", adminDSN)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dbName := fmt.Sprintf("devhost_%d", time.Now().UnixNano()%1_000_000_000)
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+dbName); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Exec("DROP DATABASE IF EXISTS " + dbName) })
	cfg.DBName = dbName
	db := testenv.DB(t, "mysql", cfg.FormatDSN())
	for range 2 { // again on an existing table
		if err := CreateOrdersFor(ctx, db, "mysql"); err != nil {
			t.Fatal(err)
		}
	}
	w := &Writer{DB: db, Layout: MySQLTimeLayout}
	wctx, stop := context.WithTimeout(ctx, 700*time.Millisecond)
	defer stop()
	before := time.Now().UTC().Add(-time.Second)
	// Run ends with the context; an error from a write the end cut short is not a failure (the
	// devhost command reads it the same way).
	if err := w.Run(wctx, 100*time.Millisecond, 5); err != nil && wctx.Err() == nil {
		t.Fatal(err)
	}
	n, newest := w.Newest()
	var count int64
	var maxStamp string
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*), DATE_FORMAT(MAX(updated_at), '%Y-%m-%d %H:%i:%s.%f') FROM orders").Scan(&count, &maxStamp); err != nil {
		t.Fatal(err)
	}
	if n < 5 || count != n || maxStamp != newest.Format(MySQLTimeLayout) || newest.Before(before) {
		t.Fatalf("%d orders written (newest %v), the table holds %d, newest %s", n, newest, count, maxStamp)
	}
	var typ string
	if err := db.QueryRowContext(ctx, "SELECT COLUMN_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'orders' AND COLUMN_NAME = 'updated_at'").Scan(&typ); err != nil || typ != "datetime(6)" {
		t.Fatalf("updated_at is %q (%v), want datetime(6)", typ, err)
	}
}
