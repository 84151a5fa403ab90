package pgcdc

import (
	"fmt"
	"strings"
)

// PublicationState is what PostgreSQL says of a publication (pg_publication).
type PublicationState struct {
	Name      string   `json:"name"`
	Exists    bool     `json:"exists"`
	AllTables bool     `json:"all_tables,omitempty"` // FOR ALL TABLES
	Covers    bool     `json:"covers"`               // it publishes the poller's table
	Publishes []string `json:"publishes,omitempty"`  // of insert, update, delete, truncate
	Tables    int      `json:"tables"`               // tables it publishes (when not FOR ALL TABLES)
}

// allOps reports whether it publishes every operation the logical cursor needs.
func (p PublicationState) allOps() bool { return len(p.Publishes) == 4 }

// Info is what the database says about a logical poller's set-up, read without writing
// anything: the server, the role and its privileges, the table and its replica identity, the
// slot and the publication.
type Info struct {
	WALLevel    string `json:"wal_level"`
	Database    string `json:"database"`
	User        string `json:"user"`
	Superuser   bool   `json:"superuser"`
	Replication bool   `json:"replication"` // the role has the REPLICATION attribute
	// CreateOnDatabase: the role has CREATE on the database (CREATE PUBLICATION needs it).
	CreateOnDatabase bool   `json:"create_on_database"`
	TableExists      bool   `json:"table_exists"`
	TableName        string `json:"table"` // schema-qualified, as PostgreSQL resolved it
	// OwnsTable: the role owns the table or is a member of its owner (adding the table to a
	// publication needs it).
	OwnsTable bool   `json:"owns_table"`
	CanSelect bool   `json:"can_select"`
	Owner     string `json:"owner,omitempty"`
	// ReplicaIdentity is default, full, index or nothing; IdentityColumns are the columns a
	// delete carries under default (the primary key) or index.
	ReplicaIdentity string   `json:"replica_identity,omitempty"`
	IdentityColumns []string `json:"identity_columns,omitempty"`

	Slot        SlotState        `json:"slot"`
	Publication PublicationState `json:"publication"`

	// ServerVersion is server_version_num (150004 for 15.4); Columns are the table's, in order.
	ServerVersion int      `json:"server_version"`
	Columns       []string `json:"-"`
	// Published is how the publication publishes the table now, Want how the poller needs it
	// (pubfilter.go); FilterErr is PostgreSQL's error reading the poller's filter, and Refused
	// what PostgreSQL refused of Want when the plan tried it in a transaction rolled back.
	Published pubTable `json:"published"`
	Want      pubTable `json:"want"`
	FilterErr string   `json:"filter_error,omitempty"`
	Refused   string   `json:"refused,omitempty"`

	// More are the same of the poller's more tables (Definition.More), in order: their table's
	// fields, and their publication's Covers, Published and Want, are theirs.
	More []Info `json:"more_tables,omitempty"`
}

// alter says whether the publication publishes the table otherwise than the poller needs.
func (i Info) alter() bool {
	return i.Publication.Exists && i.Publication.Covers && !i.Publication.AllTables && i.ServerVersion >= filtersSince && !i.Published.covers(i.Want)
}

// IdentityMeaning says what the table's REPLICA IDENTITY means for the poller's deletes.
func (i Info) IdentityMeaning() string {
	switch i.ReplicaIdentity {
	case "default":
		if len(i.IdentityColumns) == 0 {
			return "REPLICA IDENTITY DEFAULT without a primary key: updates and deletes carry no key, which the poller cannot use: add a primary key, or ALTER TABLE ... REPLICA IDENTITY FULL"
		}
		return fmt.Sprintf("REPLICA IDENTITY DEFAULT: a delete carries only the primary key (%s), not the old row, and updates carry no before image; ALTER TABLE ... REPLICA IDENTITY FULL makes updates and deletes carry the row before them (and unchanged TOAST values), at the cost of more WAL (pollerctl check offers it)", strings.Join(i.IdentityColumns, ", "))
	case "index":
		return fmt.Sprintf("REPLICA IDENTITY USING INDEX: a delete carries only the index's columns (%s), not the old row", strings.Join(i.IdentityColumns, ", "))
	case "full":
		return "REPLICA IDENTITY FULL: updates and deletes carry the row before them, an update every column"
	case "nothing":
		return "REPLICA IDENTITY NOTHING: updates and deletes carry no key at all; refused (ALTER TABLE ... REPLICA IDENTITY DEFAULT, with a primary key, or FULL)"
	}
	return "unknown replica identity " + i.ReplicaIdentity
}

// Needs lists the privileges the set-up needs, each with whether the role has it: the slot
// needs REPLICATION (or superuser); the publication CREATE on the database and ownership of the
// table (or superuser); reading needs SELECT on the table and REPLICATION. The table's own are
// the last two.
func (i Info) Needs() []Need {
	su := " (or superuser)"
	return []Need{
		{"REPLICATION attribute" + su, "to create, read and drop the slot", i.Superuser || i.Replication,
			"ALTER ROLE " + pgIdent(i.User) + " WITH REPLICATION (as a superuser; on Azure Flexible Server as the admin, which may grant it)"},
		{"CREATE on database " + i.Database + su, "to create the publication", i.Superuser || i.CreateOnDatabase,
			"GRANT CREATE ON DATABASE " + pgIdent(i.Database) + " TO " + pgIdent(i.User)},
		{"ownership of table " + i.TableName + " (owner: " + i.Owner + ")" + su, "to add the table to the publication, and to drop the publication", i.Superuser || i.OwnsTable,
			"run pollerctl cdc as the table's owner, " + pgIdent(i.Owner) + ", or as a superuser (granting the owner's role to the poller's role would give it all the owner may do)"},
		{"SELECT on table " + i.TableName, "to read the table's columns", i.Superuser || i.CanSelect,
			"GRANT SELECT ON " + i.TableName + " TO " + pgIdent(i.User)},
	}
}

// Need is one privilege the set-up needs.
type Need struct {
	What, For string
	Has       bool
	Fix       string
}
