package source_test

import (
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sqlserver"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

func TestFingerprint(t *testing.T) {
	def := sourcedef.Definition{Table: sourcedef.Table{Schema: "dbo", Name: "orders"}, Columns: []string{"id", "customer"},
		Cursor: sourcedef.Cursor{Kind: state.KindTimestampPK, Column: "updated_at"}, PK: []string{"id"}}
	fp := func(driver, dsn string, d sourcedef.Definition) string {
		t.Helper()
		loc, err := drivers.ParseLocation(driver, dsn)
		if err != nil {
			t.Fatal(err)
		}
		return source.Fingerprint(driver, loc, d)
	}
	base := fp(sqlserver.Name, "sqlserver://app:secret1@db.example.com:1433?database=shop", def)
	if !strings.HasPrefix(base, "sha256:") || len(base) != len("sha256:")+64 {
		t.Fatalf("fingerprint %q", base)
	}
	same := map[string]string{
		"password changed":      fp(sqlserver.Name, "sqlserver://app:other-secret@db.example.com:1433?database=shop", def),
		"user changed":          fp(sqlserver.Name, "sqlserver://reader:x@db.example.com:1433?database=shop", def),
		"host case":             fp(sqlserver.Name, "sqlserver://app:secret1@DB.example.com:1433?database=shop", def),
		"managed identity auth": fp(sqlserver.Name, "sqlserver://db.example.com:1433?database=shop&fedauth=ActiveDirectoryManagedIdentity&user+id=abc", def),
	}
	// A payload column decides neither the order nor the position: it is not fingerprinted.
	withAmount := def
	withAmount.Columns = append([]string{"amount"}, def.Columns...)
	same["payload column added"] = fp(sqlserver.Name, "sqlserver://app:secret1@db.example.com:1433?database=shop", withAmount)
	for name, got := range same {
		if got != base {
			t.Errorf("%s changed the fingerprint", name)
		}
	}
	changed := func(mutate func(d *sourcedef.Definition)) sourcedef.Definition {
		d := def
		d.Columns = append([]string(nil), def.Columns...)
		d.PK = append([]string(nil), def.PK...)
		mutate(&d)
		return d
	}
	differ := map[string]string{
		"table":    fp(sqlserver.Name, "sqlserver://app:secret1@db.example.com:1433?database=shop", changed(func(d *sourcedef.Definition) { d.Table.Name = "orders2" })),
		"schema":   fp(sqlserver.Name, "sqlserver://app:secret1@db.example.com:1433?database=shop", changed(func(d *sourcedef.Definition) { d.Table.Schema = "sales" })),
		"cursor":   fp(sqlserver.Name, "sqlserver://app:secret1@db.example.com:1433?database=shop", changed(func(d *sourcedef.Definition) { d.Cursor.Column = "created_at" })),
		"kind":     fp(sqlserver.Name, "sqlserver://app:secret1@db.example.com:1433?database=shop", changed(func(d *sourcedef.Definition) { d.Cursor = sourcedef.Cursor{Kind: state.KindInteger, Column: "id"} })),
		"pk":       fp(sqlserver.Name, "sqlserver://app:secret1@db.example.com:1433?database=shop", changed(func(d *sourcedef.Definition) { d.PK = []string{"id", "region"} })),
		"filter":   fp(sqlserver.Name, "sqlserver://app:secret1@db.example.com:1433?database=shop", changed(func(d *sourcedef.Definition) { d.Filter = "x = 1" })),
		"database": fp(sqlserver.Name, "sqlserver://app:secret1@db.example.com:1433?database=shop2", def),
		"server":   fp(sqlserver.Name, "sqlserver://app:secret1@db2.example.com:1433?database=shop", def),
		"driver":   fp("postgres", "postgres://app:secret1@db.example.com:1433/shop", def),
	}
	for name, got := range differ {
		if got == base {
			t.Errorf("a %s change kept the fingerprint", name)
		}
	}
	// The settle lag is operational, not what is read.
	if fp(sqlserver.Name, "sqlserver://app:secret1@db.example.com:1433?database=shop", changed(func(d *sourcedef.Definition) { d.SettleLag = time.Minute })) != base {
		t.Error("the settle lag changed the fingerprint")
	}
}

// TestFingerprintV1Golden: Identify reproduces the first form of the fingerprint that documents
// written before version 2 carry (the value below was computed by that code), so that they are
// accepted without an operator's step.
func TestFingerprintV1Golden(t *testing.T) {
	def := sourcedef.Definition{Table: sourcedef.Table{Schema: "public", Name: "orders"}, Columns: []string{"id", "customer", "amount"},
		Cursor: sourcedef.Cursor{Kind: state.KindTimestampPK, Column: "updated_at"}, PK: []string{"id"}}
	loc, err := drivers.ParseLocation("postgres", "postgres://app:secret@db.example.com:5432/shop")
	if err != nil {
		t.Fatal(err)
	}
	id := source.Identify("postgres", loc, def)
	if got, want := id.FingerprintV1(), "sha256:2b22dc313c06f8cb6a1dcc48b2b817b154cc9c075be42b3eba6d395e909e2d61"; got != want {
		t.Fatalf("FingerprintV1 %s, the first form was %s (identity %+v)", got, want, id)
	}
	if source.Fingerprint("postgres", loc, def) != id.Fingerprint() || id.Fingerprint() == id.FingerprintV1() {
		t.Fatal("Fingerprint is not the identity's second form")
	}
}
