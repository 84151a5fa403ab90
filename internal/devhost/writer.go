package devhost

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"
)

// TimeLayout is how the SQLite orders table stores updated_at: fixed-width UTC, so that text
// order is time order.
const TimeLayout = "2006-01-02T15:04:05.000000Z"

// Writer keeps inserting and updating orders, as an application would.
type Writer struct {
	DB *sql.DB
	// Layout formats updated_at (in UTC): TimeLayout when empty (SQLite), MySQLTimeLayout for
	// MySQL.
	Layout string
	// Dollar numbers the statements' parameters $1, $2... (PostgreSQL) instead of ?.
	Dollar bool

	mu     sync.Mutex
	rows   int64
	newest time.Time
}

// CreateOrders creates the example orders table (the same shape as pollers/orders reads on every driver) and its index if
// they are missing, on SQLite.
func CreateOrders(ctx context.Context, db *sql.DB) error { return CreateOrdersFor(ctx, db, "sqlite") }

// MySQLTimeLayout is how the MySQL orders table is written: a DATETIME(6) literal in UTC.
const MySQLTimeLayout = "2006-01-02 15:04:05.000000"

// CreateOrdersFor creates the example orders table and its (updated_at, id) index if they are
// missing, on driver "sqlite" (updated_at TEXT in TimeLayout), "mysql" (MySQL or MariaDB:
// updated_at DATETIME(6) in UTC) or "postgres" (updated_at TIMESTAMPTZ; write it with Dollar).
func CreateOrdersFor(ctx context.Context, db *sql.DB, driver string) error {
	switch driver {
	case "sqlite":
		_, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS orders (id BIGINT PRIMARY KEY, customer VARCHAR(100) NOT NULL,
		amount DECIMAL(12,2) NOT NULL, updated_at TEXT NOT NULL);
		CREATE INDEX IF NOT EXISTS ix_orders_updated_at_id ON orders (updated_at, id)`)
		return err
	case "mysql":
		_, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS orders (id BIGINT PRIMARY KEY, customer VARCHAR(100) NOT NULL,
		amount DECIMAL(12,2) NOT NULL, updated_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
		KEY ix_orders_updated_at_id (updated_at, id))`)
		return err
	case "postgres":
		_, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS orders (id BIGINT PRIMARY KEY, customer VARCHAR(100) NOT NULL,
		amount NUMERIC(12,2) NOT NULL, updated_at TIMESTAMPTZ NOT NULL);
		CREATE INDEX IF NOT EXISTS ix_orders_updated_at_id ON orders (updated_at, id)`)
		return err
	}
	return fmt.Errorf("the orders writer supports the drivers sqlite, mysql and postgres, not %q", driver)
}

// Run writes every interval until ctx ends: inserts new orders and updates an existing one.
func (w *Writer) Run(ctx context.Context, interval time.Duration, perTick int) error {
	var next int64
	if err := w.DB.QueryRowContext(ctx, `SELECT COALESCE(MAX(id), 0) FROM orders`).Scan(&next); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	customers := []string{"Contoso", "Fabrikam", "Northwind", "Tailspin", "Woodgrove", "Adventure Works"}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		tx, err := w.DB.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		now := time.Now().UTC()
		stamp := now.Format(w.layout())
		for range perTick {
			next++
			amount := fmt.Sprintf("%d.%02d", rng.IntN(500), rng.IntN(100))
			if _, err := tx.ExecContext(ctx, w.sql(`INSERT INTO orders VALUES (?, ?, ?, ?)`), next, customers[rng.IntN(len(customers))], amount, stamp); err != nil {
				tx.Rollback()
				return err
			}
		}
		if next > 1 { // an update moves an order to the end of the cursor order
			if _, err := tx.ExecContext(ctx, w.sql(`UPDATE orders SET amount = amount + 1, updated_at = ? WHERE id = ?`), stamp, 1+rng.Int64N(next-1)); err != nil {
				tx.Rollback()
				return err
			}
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		w.mu.Lock()
		w.rows, w.newest = next, now
		w.mu.Unlock()
	}
}

// sql numbers the ? parameters of query $1, $2... when the writer is Dollar.
func (w *Writer) sql(query string) string {
	if !w.Dollar {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func (w *Writer) layout() string {
	if w.Layout == "" {
		return TimeLayout
	}
	return w.Layout
}

// Newest returns the number of orders and the newest write's time.
func (w *Writer) Newest() (int64, time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rows, w.newest
}
