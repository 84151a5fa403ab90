package source

import (
	"database/sql"
	"sync"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
)

// DefaultPoolSize is the connections a process holds to one database at most, all its pollers
// on that database together (Pools), and a source opened without Pools on its own
// (Config.MaxOpenConns' default is 4).
const DefaultPoolSize = 10

// Pools shares connection pools among the sources one process opens: one per driver and DSN, so
// that 50 pollers reading one database hold at most Size connections to it together instead of
// a pool each (a timer that fires them at once would otherwise open 200). A poller waits for a
// connection when the database's are busy; each holds one only while a query runs.
type Pools struct {
	size int
	mu   sync.Mutex
	m    map[string]*pool
}

type pool struct {
	db   *sql.DB
	refs int
}

// NewPools returns pools of size connections each (DefaultPoolSize when size <= 0).
func NewPools(size int) *Pools {
	if size <= 0 {
		size = DefaultPoolSize
	}
	return &Pools{size: size, m: map[string]*pool{}}
}

// Size is the connections each database's pool holds at most.
func (p *Pools) Size() int { return p.size }

// acquire returns the pool for dl and dsn, opening it the first time, and the func that gives it
// back: the last one given back closes it.
func (p *Pools) acquire(dl driver.Driver, dsn string) (*sql.DB, func() error, error) {
	key := dl.Name() + "\x00" + dsn
	p.mu.Lock()
	defer p.mu.Unlock()
	sp := p.m[key]
	if sp == nil {
		db, err := dl.Open(dsn)
		if err != nil {
			return nil, nil, err
		}
		limit(db, p.size)
		sp = &pool{db: db}
		p.m[key] = sp
	}
	sp.refs++
	var once sync.Once
	release := func() error {
		var err error
		once.Do(func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			if sp.refs--; sp.refs == 0 {
				delete(p.m, key)
				err = sp.db.Close()
			}
		})
		return err
	}
	return sp.db, release, nil
}

// limit bounds a pool to n connections, idle ones closed after five minutes.
func limit(db *sql.DB, n int) {
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	db.SetConnMaxIdleTime(5 * time.Minute)
}
