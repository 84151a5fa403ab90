package pgcdc

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pglogrepl"

	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// Position is a place in a logical replication slot's stream of committed transactions: every
// transaction whose commit record starts before LSN is done, and so are the first Changes
// changes of the transaction whose commit record starts at LSN. A transaction boundary has
// Changes 0. It is the value of a logical cursor: "0/16D3290" or "0/16D3290+37".
type Position struct {
	LSN     pglogrepl.LSN
	Changes int
}

// String is the position as a cursor holds it: "0/16D3290", "0/16D3290+37".
func (p Position) String() string {
	if p.Changes == 0 {
		return p.LSN.String()
	}
	return p.LSN.String() + "+" + strconv.Itoa(p.Changes)
}

// Before reports whether p comes before q in the stream.
func (p Position) Before(q Position) bool {
	return p.LSN < q.LSN || p.LSN == q.LSN && p.Changes < q.Changes
}

// Cursor is p as a logical cursor.
func (p Position) Cursor() state.Cursor {
	return state.Cursor{Kind: state.KindLogical, Value: json.RawMessage(`"` + p.String() + `"`)} // no character to escape
}

// ParsePosition reads a position as Position.String writes it ("0/16D3290", "0/16D3290+37").
func ParsePosition(s string) (Position, error) {
	lsnText, changes, partial := strings.Cut(s, "+")
	lsn, err := pglogrepl.ParseLSN(lsnText)
	if err != nil || !strings.Contains(lsnText, "/") {
		return Position{}, fmt.Errorf("%q is not a position like 0/16D3290 or 0/16D3290+37 (an LSN, and changes done in the transaction that commits there)", s)
	}
	p := Position{LSN: lsn}
	if partial {
		if p.Changes, err = strconv.Atoi(changes); err != nil || p.Changes < 1 {
			return Position{}, fmt.Errorf("%q: the changes after '+' must be a whole number above 0", s)
		}
	}
	return p, nil
}

// CursorPosition reads a logical cursor's position.
func CursorPosition(c *state.Cursor) (Position, error) {
	if c.Kind != state.KindLogical {
		return Position{}, fmt.Errorf("a %s cursor is not a position in a replication slot", c.Kind)
	}
	if len(c.Tiebreaker) > 0 {
		return Position{}, fmt.Errorf("a logical cursor has no tiebreaker")
	}
	var s string
	if err := json.Unmarshal(c.Value, &s); err != nil {
		return Position{}, fmt.Errorf("a logical cursor's value is a string like \"0/16D3290\", not %s", c.Value)
	}
	return ParsePosition(s)
}
