package setup

import (
	"slices"
	"strings"
)

// Uniqueness is what a catalog says of a key.
type Uniqueness struct {
	Verdict KeyVerdict // KeyUnique, KeyNotUnique, KeyUnknown (a view, an expression index, no access to the catalog)
	By      string     // the constraint or index that makes it unique, for people ("" otherwise)
	Why     string     // for KeyUnknown: why the catalog cannot tell
}

// KeyVerdict is a catalog's word on a key; the zero value is KeyUnknown.
type KeyVerdict int

// The verdicts.
const (
	KeyUnknown   KeyVerdict = iota // the catalog cannot tell (a view, an expression index, no access)
	KeyUnique                      // a primary key or unique index covers it
	KeyNotUnique                   // nothing in the catalog makes it unique
)

func (v KeyVerdict) String() string {
	switch v {
	case KeyUnique:
		return "unique"
	case KeyNotUnique:
		return "not unique"
	}
	return "unknown"
}

// A UniqueIndex is a primary key or unique index (or constraint) as a catalog lists it: what a
// Driver.UniqueKey hands to JudgeKey.
type UniqueIndex struct {
	Name    string
	Primary bool
	// Columns are its columns, in order; an expression part has none (Expression is then set).
	Columns    []string
	Partial    bool // a partial (PostgreSQL, SQLite) or filtered (SQL Server) index: unique among some rows only
	Expression bool // some of its parts are expressions, not columns
}

// JudgeKey is the one rule every Driver.UniqueKey applies to the unique indexes of a table: unique
// when a primary key or an index that is neither partial nor on an expression has all its
// columns among cols (caseless: whatever their case); unknown when no such index exists but a
// unique index on an expression does (the catalog cannot say which columns it makes unique);
// not unique otherwise.
func JudgeKey(indexes []UniqueIndex, cols []string, caseless bool) Uniqueness {
	among := func(c string) bool {
		return slices.ContainsFunc(cols, func(k string) bool { return k == c || (caseless && strings.EqualFold(k, c)) })
	}
	var expr string
	for _, ix := range indexes {
		switch {
		case ix.Partial:
		case ix.Expression:
			if expr == "" {
				expr = ix.Name
			}
		case len(ix.Columns) > 0 && !slices.ContainsFunc(ix.Columns, func(c string) bool { return !among(c) }):
			what := "unique index " + ix.Name
			if ix.Primary {
				what = "primary key " + ix.Name
			}
			return Uniqueness{Verdict: KeyUnique, By: what + " (" + strings.Join(ix.Columns, ", ") + ")"}
		}
	}
	if expr != "" {
		return Uniqueness{Verdict: KeyUnknown, Why: "unique index " + expr + " is on an expression, which the catalog cannot match to the key's columns"}
	}
	return Uniqueness{Verdict: KeyNotUnique}
}
