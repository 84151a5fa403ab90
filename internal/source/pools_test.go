package source

import (
	"database/sql"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
)

// poolDriver opens SQLite files, for the pools' bookkeeping.
type poolDriver struct{ driver.Driver }

func (poolDriver) Name() string                     { return "sqlite" }
func (poolDriver) Open(dsn string) (*sql.DB, error) { return sql.Open("sqlite", dsn) }

// TestPoolsShareAndClose: one pool per driver and DSN, sized by the Pools; given back by each
// holder once (a second release is nothing), closed when the last one gives it back.
func TestPoolsShareAndClose(t *testing.T) {
	p := NewPools(0)
	if p.Size() != DefaultPoolSize {
		t.Fatalf("size %d, want the default %d", p.Size(), DefaultPoolSize)
	}
	a, b := filepath.Join(t.TempDir(), "a.db"), filepath.Join(t.TempDir(), "b.db")
	db1, rel1, err := p.acquire(poolDriver{}, a)
	if err != nil {
		t.Fatal(err)
	}
	db2, rel2, _ := p.acquire(poolDriver{}, a)
	db3, rel3, _ := p.acquire(poolDriver{}, b)
	if db1 != db2 || db1 == db3 {
		t.Fatal("one DSN got two pools, or two DSNs one")
	}
	if got := db1.Stats().MaxOpenConnections; got != DefaultPoolSize {
		t.Fatalf("the pool holds up to %d connections, want %d", got, DefaultPoolSize)
	}
	_ = rel1()
	_ = rel1() // a second release of the same holder changes nothing
	if err := db1.Ping(); err != nil {
		t.Fatalf("closed while another holder has it: %v", err)
	}
	_ = rel2()
	if err := db1.Ping(); err == nil {
		t.Fatal("still open after its last holder gave it back")
	}
	if err := db3.Ping(); err != nil {
		t.Fatalf("another DSN's pool closed: %v", err)
	}
	_ = rel3()
	db4, rel4, _ := p.acquire(poolDriver{}, a)
	defer rel4()
	if db4 == db1 || db4.Ping() != nil {
		t.Fatal("a pool closed is not opened again")
	}
}
