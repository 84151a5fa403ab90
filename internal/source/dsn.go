package source

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/microsoft/go-mssqldb/msdsn"

	"github.com/pseudotrigger/pseudotrigger/internal/redact"
)

// Location is where a source lives, without credentials: what the fingerprint covers.
type Location struct {
	Server   string // host[:port][\instance]; empty for SQLite
	Database string // database name; the file path for SQLite
}

// ParseLocation reads the server and database out of a DSN.
func ParseLocation(driver, dsn string) (Location, error) {
	switch driver {
	case Postgres:
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			return Location{}, fmt.Errorf("the postgres connection string is not valid (%s)", redact.DSN(dsn))
		}
		return Location{Server: fmt.Sprintf("%s:%d", strings.ToLower(cfg.Host), cfg.Port), Database: cfg.Database}, nil
	case SQLServer:
		cfg, err := msdsn.Parse(dsn)
		if err != nil {
			return Location{}, fmt.Errorf("the sqlserver connection string is not valid (%s)", redact.DSN(dsn))
		}
		server := strings.ToLower(cfg.Host)
		if cfg.Instance != "" {
			server += `\` + strings.ToLower(cfg.Instance)
		}
		if cfg.Port != 0 {
			server += fmt.Sprintf(":%d", cfg.Port)
		}
		return Location{Server: server, Database: cfg.Database}, nil
	case SQLite:
		path := strings.TrimPrefix(dsn, "file:")
		if i := strings.IndexByte(path, '?'); i >= 0 {
			path = path[:i]
		}
		if path == "" || path == ":memory:" {
			return Location{Database: path}, nil
		}
		return Location{Database: filepath.Clean(path)}, nil
	}
	return Location{}, fmt.Errorf("unknown driver %q", driver)
}

// Fingerprint is "sha256:" and the hex SHA-256 of a canonical form of the source: driver,
// server, database, table, columns, cursor kind and column, key columns and filter. Never a
// password or token: changing credentials keeps the fingerprint, changing what is read does not.
func Fingerprint(driver string, loc Location, d Definition) string {
	canon := struct {
		V        int      `json:"v"`
		Driver   string   `json:"driver"`
		Server   string   `json:"server"`
		Database string   `json:"database"`
		Schema   string   `json:"schema"`
		Table    string   `json:"table"`
		Columns  []string `json:"columns"`
		Kind     string   `json:"cursor_kind"`
		Cursor   string   `json:"cursor_column"`
		PK       []string `json:"pk"`
		Filter   string   `json:"filter"`
	}{1, driver, loc.Server, loc.Database, d.Table.Schema, d.Table.Name, d.selected(), d.Cursor.Kind, d.Cursor.Column, d.PK, strings.TrimSpace(d.Filter)}
	b, _ := json.Marshal(canon) // strings and slices only: cannot fail
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
