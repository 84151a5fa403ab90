package pgcdc

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// EnablePlan is what Enable would do, from Inspect's Info: the statements, and the problems
// that refuse it (nothing is created when there is any).
type EnablePlan struct {
	Info     Info
	Steps    []string // the SQL it runs, in order; none when everything exists
	Problems []string // each names the fix
}

// PlanEnable decides what Enable does, without writing: create the publication when missing,
// then the slot when missing; refuse when the server, the role, the table or an existing slot or
// publication of those names does not fit.
func (c *Admin) PlanEnable(info Info) EnablePlan {
	p := EnablePlan{Info: info}
	bad := func(format string, args ...any) { p.Problems = append(p.Problems, fmt.Sprintf(format, args...)) }
	if info.WALLevel != "logical" {
		bad("the server's wal_level is %q; logical decoding needs wal_level = logical (ALTER SYSTEM SET wal_level = logical and restart; on Azure Database for PostgreSQL Flexible Server set the server parameter wal_level to LOGICAL and restart)", info.WALLevel)
	}
	if len(c.parts) > 0 {
		return c.planTables(p)
	}
	if c.def.ReadsMessages() {
		return c.planMessages(p)
	}
	if !c.tableProblems(info, bad) {
		return p
	}
	pub := info.Publication
	switch {
	case !pub.Exists:
		p.Steps = append(p.Steps, c.CreatePublicationSQL(info))
		if !info.Superuser && !info.CreateOnDatabase {
			bad("creating publication %q needs CREATE on database %s: GRANT CREATE ON DATABASE %s TO %s", pub.Name, info.Database, pgIdent(info.Database), pgIdent(info.User))
		}
		if !info.Superuser && !info.OwnsTable {
			bad("adding table %s to publication %q needs its ownership (owner: %s): run pollerctl cdc as %s or as a superuser", info.TableName, pub.Name, info.Owner, pgIdent(info.Owner))
		}
	case !pub.Covers:
		bad("publication %q exists but does not publish table %s: ALTER PUBLICATION %s ADD TABLE %s, or set {P}_CDC_PUBLICATION to another name", pub.Name, info.TableName, pgIdent(pub.Name), info.TableName)
	case !pub.allOps():
		bad("publication %q publishes only %s; a delete or truncate it leaves out would be lost silently: ALTER PUBLICATION %s SET (publish = 'insert, update, delete, truncate')",
			pub.Name, strings.Join(pub.Publishes, ", "), pgIdent(pub.Name))
	case info.alter():
		p.Steps = append(p.Steps, c.AlterPublicationSQL(info))
	}
	c.planSlot(&p, bad)
	return p
}

// planTables is PlanEnable of a poller of several tables (one publication of them all, one
// slot), after the server's checks: each table's problems, then the publication made or changed
// to publish every table as the poller needs (a table missing from it is added, which a table
// added to the poller needs), then the slot.
func (c *Admin) planTables(p EnablePlan) EnablePlan {
	info := p.Info
	bad := func(format string, args ...any) { p.Problems = append(p.Problems, fmt.Sprintf(format, args...)) }
	all, infos := c.tables(info)
	exist := true
	for i, t := range all {
		exist = t.tableProblems(infos[i], bad) && exist
	}
	if !exist {
		return p
	}
	pub := info.Publication
	owns := func() { // making or changing the publication of the tables needs each one's ownership
		for _, ti := range infos {
			if !ti.Superuser && !ti.OwnsTable {
				bad("publishing table %s in publication %q needs its ownership (owner: %s): run pollerctl cdc as %s or as a superuser", ti.TableName, pub.Name, ti.Owner, pgIdent(ti.Owner))
			}
		}
	}
	switch {
	case !pub.Exists:
		p.Steps = append(p.Steps, c.CreatePublicationSQL(info))
		if !info.Superuser && !info.CreateOnDatabase {
			bad("creating publication %q needs CREATE on database %s: GRANT CREATE ON DATABASE %s TO %s", pub.Name, info.Database, pgIdent(info.Database), pgIdent(info.User))
		}
		owns()
	case !pub.allOps():
		bad("publication %q publishes only %s; a delete or truncate it leaves out would be lost silently: ALTER PUBLICATION %s SET (publish = 'insert, update, delete, truncate')",
			pub.Name, strings.Join(pub.Publishes, ", "), pgIdent(pub.Name))
	default:
		if q := c.AlterPublicationSQL(info); q != "" {
			p.Steps = append(p.Steps, q)
			owns()
		}
	}
	c.planSlot(&p, bad)
	return p
}

// planMessages is PlanEnable of a messages outbox, after the server's checks: PostgreSQL 14 or
// later (pgoutput's messages option), a publication (made of no table when missing; an existing
// one of that name serves whatever it publishes), then the slot.
func (c *Admin) planMessages(p EnablePlan) EnablePlan {
	info := p.Info
	bad := func(format string, args ...any) { p.Problems = append(p.Problems, fmt.Sprintf(format, args...)) }
	if old := MessagesTooOld(info.ServerVersion); old != "" {
		bad("%s", old)
	}
	if !info.Publication.Exists {
		p.Steps = append(p.Steps, c.CreatePublicationSQL(info))
		if !info.Superuser && !info.CreateOnDatabase {
			bad("creating publication %q needs CREATE on database %s: GRANT CREATE ON DATABASE %s TO %s", info.Publication.Name, info.Database, pgIdent(info.Database), pgIdent(info.User))
		}
	}
	c.planSlot(&p, bad)
	return p
}

// MessagesSince is the first PostgreSQL (server_version_num) whose pgoutput sends logical
// decoding messages (its option messages).
const MessagesSince = 140000

// MessagesTooOld says why a server of version (server_version_num) cannot serve a messages
// outbox, or "" when it can.
func MessagesTooOld(version int) string {
	if version >= MessagesSince {
		return ""
	}
	return fmt.Sprintf("the server is PostgreSQL %d.%d; its pgoutput sends logical decoding messages (pg_logical_emit_message) from PostgreSQL 14: upgrade the server, or write the events into an outbox table", version/10000, version%10000)
}

// tableProblems adds, through bad, what keeps table c's changes from being read as the poller
// needs (its replica identity, its filter), and says whether the table exists.
func (c *Admin) tableProblems(info Info, bad func(format string, args ...any)) bool {
	if !info.TableExists {
		bad("table %s does not exist (or the role cannot see it)", c.def.Table)
		return false
	}
	switch {
	case info.ReplicaIdentity == "nothing":
		bad("table %s has REPLICA IDENTITY NOTHING: its updates and deletes carry no key: ALTER TABLE %s REPLICA IDENTITY DEFAULT (with a primary key) or FULL", info.TableName, info.TableName)
	case info.ReplicaIdentity != "full" && len(info.IdentityColumns) == 0:
		bad("table %s has no primary key, so its deletes carry no key: add one, or ALTER TABLE %s REPLICA IDENTITY FULL", info.TableName, info.TableName)
	case info.ReplicaIdentity != "full" && !slices.Equal(sortedStrings(info.IdentityColumns), sortedStrings(c.def.PK)):
		bad("the poller's key (%s) is not what a delete of %s carries (%s): make the poller's key %s, or ALTER TABLE %s REPLICA IDENTITY FULL",
			strings.Join(c.def.PK, ", "), info.TableName, strings.Join(info.IdentityColumns, ", "), strings.Join(info.IdentityColumns, ", "), info.TableName)
	}
	switch {
	case filterTooOld(c.def, info.ServerVersion) != "":
		bad("%s", filterTooOld(c.def, info.ServerVersion))
	case info.FilterErr != "":
		bad("PostgreSQL cannot read the poller's filter: %s: correct the filter (source.filter in poller.json, poller.WithFilter in Go)", info.FilterErr)
	case info.Refused != "":
		bad("PostgreSQL refuses to publish table %s as the poller needs it (%s): %s; with such a publication every UPDATE or DELETE of the table would fail. A row filter of a publication of updates and deletes may use only the replica identity's columns (%s), and a column list must hold them (every column under REPLICA IDENTITY FULL): filter on those columns, or ALTER TABLE %s REPLICA IDENTITY FULL, at a cost in WAL (pollerctl check shows it)",
			info.TableName, info.Want, info.Refused, strings.Join(info.IdentityColumns, ", "), info.TableName)
	}
	return true
}

// planSlot adds the slot's step to p, or its problems through bad.
func (c *Admin) planSlot(p *EnablePlan, bad func(format string, args ...any)) {
	info := p.Info
	slot := info.Slot
	switch {
	case !slot.Exists:
		p.Steps = append(p.Steps, strings.Replace(createSlotSQL, "$1", "'"+slot.Name+"'", 1))
		if !info.Superuser && !info.Replication {
			bad("creating replication slot %q needs the REPLICATION attribute: ALTER ROLE %s WITH REPLICATION (as a superuser, or on Azure Flexible Server as the admin)", slot.Name, pgIdent(info.User))
		}
	case slot.Type != "logical" || slot.Plugin != "pgoutput":
		bad("replication slot %q exists but is a %s slot with plugin %q, not a logical slot with pgoutput: set {P}_CDC_SLOT to another name (or drop that slot if nothing uses it)", slot.Name, slot.Type, slot.Plugin)
	case !slot.Here:
		bad("replication slot %q exists but decodes database %q, not %q: set {P}_CDC_SLOT to another name", slot.Name, slot.Database, info.Database)
	case slot.WALStatus == "lost":
		bad("replication slot %q has lost WAL it needs (wal_status lost, max_slot_wal_keep_size): it cannot be read; drop it (pollerctl cdc disable) and enable again, then reset the poller", slot.Name)
	}
}

func sortedStrings(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

// Enabled is what Enable did.
type Enabled struct {
	CreatedPublication bool
	AlteredPublication bool // it publishes the table as the poller needs now (filter, columns)
	CreatedSlot        bool
	Slot               SlotState // the slot afterwards
}

// Enable creates the publication (when missing), then the slot (when missing), after PlanEnable
// finds no problem; an existing slot and publication that fit are kept. The publication is made
// first: a slot without it could not be read, and a slot is what costs disk. When the slot cannot
// be made after the publication was, the error says so, and what exists: running Enable again
// reuses the publication.
func (c *Admin) Enable(ctx context.Context) (Enabled, error) {
	var done Enabled
	info, err := c.Inspect(ctx)
	if err != nil {
		return done, err
	}
	plan := c.PlanEnable(info)
	if len(plan.Problems) > 0 {
		return done, fmt.Errorf("source: poller %q: %w: %s; nothing was created", c.poller, ErrSetup, strings.Join(plan.Problems, "; "))
	}
	if !info.Publication.Exists {
		if _, err := c.db.ExecContext(ctx, c.CreatePublicationSQL(info)); err != nil {
			return done, fmt.Errorf("source: poller %q: %w: creating publication %q: %v; nothing was created", c.poller, ErrSetup, c.def.Publication, err)
		}
		done.CreatedPublication = true
	}
	if q := c.AlterPublicationSQL(info); q != "" {
		if _, err := c.db.ExecContext(ctx, q); err != nil {
			return done, fmt.Errorf("source: poller %q: %w: changing how publication %q publishes the table (%s): %v; nothing was changed", c.poller, ErrSetup, c.def.Publication, q, err)
		}
		done.AlteredPublication = true
	}
	if !info.Slot.Exists {
		if _, err := c.db.ExecContext(ctx, createSlotSQL, c.def.Slot); err != nil {
			what := fmt.Sprintf("publication %q existed before", c.def.Publication)
			if done.CreatedPublication {
				what = fmt.Sprintf("publication %q was created and is kept (running `cdc enable` again reuses it; `cdc disable` drops it)", c.def.Publication)
			}
			return done, fmt.Errorf("source: poller %q: %w: creating replication slot %q: %v; the slot does not exist; %s", c.poller, ErrSetup, c.def.Slot, err, what)
		}
		done.CreatedSlot = true
	}
	if done.Slot, err = SlotStatus(ctx, c.db, c.def.Slot); err != nil {
		return done, fmt.Errorf("source: poller %q: %w", c.poller, err)
	}
	return done, nil
}

// DisablePlan is what Disable would do: the statements, and what it leaves alone and why.
type DisablePlan struct {
	Info  Info
	Steps []string
	// Keep says why the publication is kept (it publishes other tables too, or it is FOR ALL
	// TABLES: other readers may use it); "" when it is dropped or absent.
	Keep     string
	Problems []string
}

// PlanDisable decides what Disable does, without writing: drop the slot (when it exists and is
// the poller's kind of slot), then the publication (when it exists and publishes only the
// poller's table).
func (c *Admin) PlanDisable(info Info) DisablePlan {
	p := DisablePlan{Info: info}
	bad := func(format string, args ...any) { p.Problems = append(p.Problems, fmt.Sprintf(format, args...)) }
	slot := info.Slot
	switch {
	case !slot.Exists:
	case slot.Type != "logical" || slot.Plugin != "pgoutput" || !slot.Here:
		bad("replication slot %q is not this poller's kind of slot (a %s slot, plugin %q, database %q): not dropped; if nothing uses it, drop it by hand: SELECT pg_drop_replication_slot('%s')",
			slot.Name, slot.Type, slot.Plugin, slot.Database, slot.Name)
	case slot.Active:
		bad("replication slot %q is being read right now (active: a tick reads it, or a following tick streams it until its {P}_FOLLOW ends and holds the stream for the next tick up to 12 s more): run again when the stream is over", slot.Name)
	default:
		p.Steps = append(p.Steps, strings.Replace(dropSlotSQL, "$1", "'"+slot.Name+"'", 1))
		if !info.Superuser && !info.Replication {
			bad("dropping replication slot %q needs the REPLICATION attribute: ALTER ROLE %s WITH REPLICATION", slot.Name, pgIdent(info.User))
		}
	}
	pub := info.Publication
	mine := 0 // the poller's tables it publishes
	for _, ti := range append([]Info{info}, info.More...) {
		if ti.Publication.Covers {
			mine++
		}
	}
	switch {
	case !pub.Exists:
	case pub.AllTables || pub.Tables > mine:
		what := fmt.Sprintf("%d tables", pub.Tables)
		if pub.AllTables {
			what = "FOR ALL TABLES"
		}
		p.Keep = fmt.Sprintf("publication %q publishes other tables too (%s): kept, as other readers may use it; to take only this table out: ALTER PUBLICATION %s DROP TABLE %s",
			pub.Name, what, pgIdent(pub.Name), info.TableName)
	default:
		p.Steps = append(p.Steps, c.DropPublicationSQL())
		if !info.Superuser && !info.OwnsTable {
			bad("dropping publication %q needs ownership of it (the role that created it) or superuser", pub.Name)
		}
	}
	return p
}

// Disabled is what Disable did.
type Disabled struct {
	DroppedSlot        bool
	DroppedPublication bool
}

// Disable drops the slot (first: it is what keeps WAL) and then the publication, as PlanDisable
// decides, after it finds no problem.
func (c *Admin) Disable(ctx context.Context) (Disabled, error) {
	var done Disabled
	info, err := c.Inspect(ctx)
	if err != nil {
		return done, err
	}
	plan := c.PlanDisable(info)
	if len(plan.Problems) > 0 {
		return done, fmt.Errorf("source: poller %q: %w: %s; nothing was dropped", c.poller, ErrSetup, strings.Join(plan.Problems, "; "))
	}
	if info.Slot.Exists {
		if _, err := c.db.ExecContext(ctx, dropSlotSQL, c.def.Slot); err != nil {
			return done, fmt.Errorf("source: poller %q: %w: dropping replication slot %q: %v; nothing was dropped", c.poller, ErrSetup, c.def.Slot, err)
		}
		done.DroppedSlot = true
	}
	if slices.Contains(plan.Steps, c.DropPublicationSQL()) {
		if _, err := c.db.ExecContext(ctx, c.DropPublicationSQL()); err != nil {
			what := "nothing was dropped"
			if done.DroppedSlot {
				what = fmt.Sprintf("the slot %q was dropped; the publication is left (drop it by hand: %s)", c.def.Slot, c.DropPublicationSQL())
			}
			return done, fmt.Errorf("source: poller %q: %w: dropping publication %q: %v; %s", c.poller, ErrSetup, c.def.Publication, err, what)
		}
		done.DroppedPublication = true
	}
	return done, nil
}
