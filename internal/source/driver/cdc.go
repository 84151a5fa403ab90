package driver

import (
	"context"
	"database/sql"

	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// A CDCSetup administers one poller's change-stream set-up. Its texts are for people; its
// errors name the fix and say what was done.
type CDCSetup interface {
	// String describes the database and the table, without secrets.
	String() string
	Close() error
	// PlanEnable and PlanDisable read the set-up and say what Enable or Disable would do,
	// without writing. checkpoint is the poller's, as people read it.
	PlanEnable(ctx context.Context) (CDCPlan, error)
	PlanDisable(ctx context.Context, checkpoint string) (CDCPlan, error)
	// Enable and Disable carry their plan out, refusing when it has problems, and say what they
	// did, one line each (also when they then fail).
	Enable(ctx context.Context) ([]string, error)
	Disable(ctx context.Context) ([]string, error)
	// Enabled says what the poller's checkpoint c (nil: none) means for the set-up Enable made;
	// "" when nothing.
	Enabled(c *state.Cursor) string
	// CheckReset says whether a reset may put the poller's checkpoint at c (nil: the
	// beginning), which what names: a note for people, or why not (an error wrapping source.ErrCursor
	// when c is no position of the stream at all).
	CheckReset(ctx context.Context, c *state.Cursor, what string) (note string, err error)
	// Clone decides where a clone starts that reads this set-up, its own, instead of the
	// original's: where the original is, when this set-up can serve that; else, with
	// fromStart, where this set-up starts, said aloud; else it refuses.
	Clone(ctx context.Context, orig Original, fromStart bool) (Cloned, error)
}

// A CDCPlan is what enabling or disabling a poller's set-up would do, read without writing.
type CDCPlan struct {
	Info     []string // the set-up as the database has it, one printed line each
	Steps    []string // the statements it runs, in order; none when there is nothing to do
	None     string   // what no step means, said after "none" ("" for nothing more)
	Kept     string   // what it leaves alone, and why
	Problems []string // what refuses it, each naming its fix
	Nothing  string   // why there is nothing to do, said after the poller's name
	Note     string   // what to know before saying yes (what it costs, what is lost), as printed
}

// Cloned is where a clone that reads a set-up of its own starts.
type Cloned struct {
	Cursor *state.Cursor // its checkpoint; nil: where its own stream starts
	Notes  []string      // for people
	Reads  string        // what it reads, for people
}

// A Conn is a poller's database as a driver's administration of its set-up gets it
// (Driver.OpenCDC): connected and answering, nothing of its table checked.
type Conn struct {
	Poller     string
	Definition sourcedef.Definition
	DB         *sql.DB // a pool of one connection
	Describe   string  // the driver, server, database and table, without secrets
}

// Original is the poller a clone copies (CDCSetup.Clone).
type Original struct {
	Poller     string
	Definition sourcedef.Definition // how it is read
	Checkpoint *state.Cursor        // its checkpoint; nil when none
}
