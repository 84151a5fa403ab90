package sqlserver

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"unicode/utf16"
)

// tdsServer is a TDS endpoint just good enough for go-mssqldb to sign in to and send queries to:
// it records the statement and the parameter declarations of each sp_executesql call, which is
// what go-mssqldb makes of a query with arguments (the declarations are its choice of each
// argument's SQL type: makeDecl), and answers each with no rows, or with the one value answers
// holds for a statement. It is how the SQL and the parameter types this package sends
// are checked without a SQL Server (MS-TDS: the packet header 2.2.3.1, PRELOGIN 2.2.6.5,
// LOGINACK 2.2.7.14, DONE 2.2.7.6, RPC Request 2.2.6.6, COLMETADATA 2.2.7.4, ROW 2.2.7.19).
type tdsServer struct {
	t  *testing.T
	ln net.Listener
	// answers: a statement's prefix -> what it returns: one row of one value ([]byte: varbinary,
	// int32: int, int64: bigint), or tdsRows.
	answers map[string]any

	mu    sync.Mutex
	calls []rpcCall
}

// rpcCall is one statement: an sp_executesql call's, with its parameters' declarations
// ("@p1 datetime,@p2 varchar(5)") and the values of its leading integer parameters (Ints: up to
// the first of another type), or a batch's (a query without arguments), with none.
type rpcCall struct {
	SQL, Decl string
	Ints      []int64
}

// tdsRows is an answer of several rows, each value an int64 (bigint), a string (nvarchar) or
// nil; a column's type is its first non-nil value's.
type tdsRows [][]any

// newTDSServer listens on a free 127.0.0.1 port until the test ends.
func newTDSServer(t *testing.T) *tdsServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &tdsServer{t: t, ln: ln, answers: map[string]any{}}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { defer c.Close(); s.serve(c) })
		}
	})
	return s
}

// DSN is a go-mssqldb connection string to the server.
func (s *tdsServer) DSN() string {
	return "sqlserver://sa:unused@" + s.ln.Addr().String() + "?database=shop&encrypt=disable&dial+timeout=5"
}

// Calls are the statements received so far: sp_executesql calls and batches (no Decl).
func (s *tdsServer) Calls() []rpcCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]rpcCall(nil), s.calls...)
}

// Call is the last call whose statement contains part; it fails the test when there is none.
func (s *tdsServer) Call(part string) rpcCall {
	s.t.Helper()
	calls := s.Calls()
	for i := len(calls) - 1; i >= 0; i-- {
		if strings.Contains(calls[i].SQL, part) {
			return calls[i]
		}
	}
	s.t.Fatalf("no statement containing %q was sent; the server got %+v", part, calls)
	return rpcCall{}
}

const (
	tdsSQLBatch  = 1
	tdsRPC       = 3
	tdsAttention = 6
	tdsTM        = 14 // a transaction manager request: begin, commit, rollback
	tdsReply     = 4
	tdsLogin7    = 16
	tdsPrelogin  = 18
	tdsTokenDone = 0xFD
)

func (s *tdsServer) serve(c net.Conn) {
	for {
		typ, msg, err := readTDS(c)
		if err != nil {
			return
		}
		var reply []byte
		switch typ {
		case tdsPrelogin: // ENCRYPTION (1) = ENCRYPT_NOT_SUP (2), then the terminator
			reply = []byte{0x01, 0x00, 0x06, 0x00, 0x01, 0xFF, 0x02}
		case tdsLogin7: // LOGINACK (TDS 7.4, no program name) and DONE
			reply = append([]byte{0xAD, 10, 0, 1, 0x74, 0x00, 0x00, 0x04, 0, 0, 0, 0, 0}, done()...)
		case tdsRPC:
			call, err := parseRPC(msg)
			if err != nil {
				s.t.Errorf("the server could not read an RPC request: %v", err)
				return
			}
			s.mu.Lock()
			s.calls = append(s.calls, call)
			s.mu.Unlock()
			reply = s.answer(call.SQL)
		case tdsAttention: // a query cancelled, as closing its rows early does: acknowledged
			reply = []byte{tdsTokenDone, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
		case tdsTM: // begin (5), commit (7) or rollback (8): the ENVCHANGE that says so, and DONE
			n := int(binary.LittleEndian.Uint32(msg))
			id := []byte{8, 1, 0, 0, 0, 0, 0, 0, 0} // a transaction descriptor, with its length
			switch binary.LittleEndian.Uint16(msg[n:]) {
			case 5:
				reply = append(append([]byte{0xE3, 11, 0, 8}, id...), 0)
			case 7:
				reply = append([]byte{0xE3, 11, 0, 9, 0}, id...)
			default:
				reply = append([]byte{0xE3, 11, 0, 10, 0}, id...)
			}
			reply = append(reply, done()...)
		case tdsSQLBatch: // a query without arguments: ALL_HEADERS, then its text
			text, err := parseBatch(msg)
			if err != nil {
				s.t.Errorf("the server could not read a SQL batch: %v", err)
				return
			}
			s.mu.Lock()
			s.calls = append(s.calls, rpcCall{SQL: text})
			s.mu.Unlock()
			reply = s.answer(text)
		default:
			s.t.Errorf("the server got a TDS message of type %d it does not answer", typ)
			return
		}
		if err := writeTDS(c, reply); err != nil {
			return
		}
	}
}

// answer is the reply to a statement: the one value answers holds for it, or no rows.
func (s *tdsServer) answer(sql string) []byte {
	for prefix, v := range s.answers {
		if strings.HasPrefix(sql, prefix) {
			var b bytes.Buffer
			// COLMETADATA: one column, user type 0, flags nullable, its type, no name; then a ROW.
			b.Write([]byte{0x81, 1, 0, 0, 0, 0, 0, 0x01, 0x00})
			switch v := v.(type) {
			case []byte: // BIGVARBINARY(8000)
				b.Write([]byte{0xA5, 0x40, 0x1F, 0, 0xD1})
				binary.Write(&b, binary.LittleEndian, uint16(len(v)))
				b.Write(v)
			case int32: // INT4
				b.Write([]byte{0x38, 0, 0xD1})
				binary.Write(&b, binary.LittleEndian, v)
			case int64: // INT8
				b.Write([]byte{0x7F, 0, 0xD1})
				binary.Write(&b, binary.LittleEndian, v)
			case tdsRows:
				return append(rowsReply(v), done()...)
			default:
				s.t.Errorf("the server cannot answer a %T", v)
			}
			return append(b.Bytes(), done()...)
		}
	}
	return done()
}

// rowsReply is COLMETADATA and a ROW for each row: INTN(8) for int64 columns, NVARCHAR(4000)
// for string columns, NULL where a value is nil.
func rowsReply(rows tdsRows) []byte {
	var b bytes.Buffer
	n := len(rows[0])
	b.WriteByte(0x81)
	binary.Write(&b, binary.LittleEndian, uint16(n))
	text := make([]bool, n)
	for i := range n {
		for _, r := range rows {
			if _, ok := r[i].(string); ok {
				text[i] = true
			}
		}
		b.Write([]byte{0, 0, 0, 0, 0x01, 0x00}) // user type, flags: nullable
		if text[i] {
			b.Write([]byte{0xE7, 0x40, 0x1F, 0x09, 0x04, 0xD0, 0x00, 0x34}) // NVARCHAR(4000), Latin1_General_CI_AS
		} else {
			b.Write([]byte{0x26, 8}) // INTN(8)
		}
		b.WriteByte(0) // no name
	}
	for _, r := range rows {
		b.WriteByte(0xD1)
		for i, v := range r {
			switch v := v.(type) {
			case nil:
				if text[i] {
					b.Write([]byte{0xFF, 0xFF})
				} else {
					b.WriteByte(0)
				}
			case int64:
				b.WriteByte(8)
				binary.Write(&b, binary.LittleEndian, v)
			case string:
				u := utf16.Encode([]rune(v))
				binary.Write(&b, binary.LittleEndian, uint16(2*len(u)))
				binary.Write(&b, binary.LittleEndian, u)
			}
		}
	}
	return b.Bytes()
}

// done is a final DONE token: no more results.
func done() []byte { return []byte{tdsTokenDone, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0} }

// readTDS reads one message: its packets' payloads up to the one marked end of message.
func readTDS(r io.Reader) (typ byte, msg []byte, err error) {
	for {
		var h [8]byte
		if _, err := io.ReadFull(r, h[:]); err != nil {
			return 0, nil, err
		}
		n := int(binary.BigEndian.Uint16(h[2:4])) - 8
		if n < 0 {
			return 0, nil, errors.New("a packet shorter than its header")
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(r, body); err != nil {
			return 0, nil, err
		}
		typ, msg = h[0], append(msg, body...)
		if h[1]&1 == 1 {
			return typ, msg, nil
		}
	}
}

// writeTDS writes a reply in one packet.
func writeTDS(w io.Writer, payload []byte) error {
	h := []byte{tdsReply, 1, 0, 0, 0, 0, 1, 0}
	binary.BigEndian.PutUint16(h[2:4], uint16(8+len(payload)))
	_, err := w.Write(append(h, payload...))
	return err
}

// parseRPC reads an sp_executesql request's first two parameters: the statement and the
// declarations, both NVARCHAR (PLP when long).
func parseRPC(msg []byte) (rpcCall, error) {
	r := bytes.NewReader(msg)
	var headers uint32
	if err := binary.Read(r, binary.LittleEndian, &headers); err != nil {
		return rpcCall{}, err
	}
	if _, err := r.Seek(int64(headers), io.SeekStart); err != nil {
		return rpcCall{}, err
	}
	var proc struct{ Switch, ID, Flags uint16 }
	if err := binary.Read(r, binary.LittleEndian, &proc); err != nil {
		return rpcCall{}, err
	}
	if proc.Switch != 0xFFFF || proc.ID != 10 {
		return rpcCall{}, fmt.Errorf("not sp_executesql (%x %d)", proc.Switch, proc.ID)
	}
	var vals [2]string
	for i := range vals {
		v, err := nvarcharParam(r)
		if err != nil {
			return rpcCall{}, fmt.Errorf("parameter %d: %w", i+1, err)
		}
		vals[i] = v
	}
	call := rpcCall{SQL: vals[0], Decl: vals[1]}
	for {
		v, ok := intParam(r)
		if !ok {
			return call, nil
		}
		call.Ints = append(call.Ints, v)
	}
}

// intParam reads a parameter that is an INTN(8) (go-mssqldb's int64); false at the end or at a
// parameter of another type.
func intParam(r *bytes.Reader) (int64, bool) {
	nameLen, err := r.ReadByte()
	if err != nil {
		return 0, false
	}
	var head [4]byte // status, type, size, the value's length
	if _, err := r.Seek(int64(nameLen)*2, io.SeekCurrent); err != nil {
		return 0, false
	}
	if _, err := io.ReadFull(r, head[:]); err != nil || head[1] != 0x26 || head[2] != 8 || head[3] != 8 {
		return 0, false
	}
	var v int64
	if err := binary.Read(r, binary.LittleEndian, &v); err != nil {
		return 0, false
	}
	return v, true
}

// parseBatch reads a SQL batch's text (UCS-2 after ALL_HEADERS).
func parseBatch(msg []byte) (string, error) {
	if len(msg) < 4 {
		return "", errors.New("no ALL_HEADERS")
	}
	n := int(binary.LittleEndian.Uint32(msg))
	if n > len(msg) {
		return "", errors.New("ALL_HEADERS longer than the message")
	}
	return ucs2(msg[n:]), nil
}

// ucs2 decodes UCS-2 (little-endian UTF-16) text.
func ucs2(b []byte) string {
	u := make([]uint16, len(b)/2)
	for i := range u {
		u[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	return string(utf16.Decode(u))
}

// nvarcharParam reads a parameter's name, status, NVARCHAR type info and value.
func nvarcharParam(r *bytes.Reader) (string, error) {
	nameLen, err := r.ReadByte()
	if err != nil {
		return "", err
	}
	var skip [1 + 1 + 2 + 5]byte // name (UCS-2) comes first; then status, type, max length, collation
	if _, err := r.Seek(int64(nameLen)*2, io.SeekCurrent); err != nil {
		return "", err
	}
	if _, err := io.ReadFull(r, skip[:]); err != nil {
		return "", err
	}
	if skip[1] != 0xE7 {
		return "", fmt.Errorf("type 0x%X, not NVARCHAR", skip[1])
	}
	var data []byte
	if binary.LittleEndian.Uint16(skip[2:4]) == 0xFFFF { // PLP: total length, then chunks
		var total uint64
		if err := binary.Read(r, binary.LittleEndian, &total); err != nil {
			return "", err
		}
		for {
			var n uint32
			if err := binary.Read(r, binary.LittleEndian, &n); err != nil {
				return "", err
			}
			if n == 0 {
				break
			}
			chunk := make([]byte, n)
			if _, err := io.ReadFull(r, chunk); err != nil {
				return "", err
			}
			data = append(data, chunk...)
		}
	} else {
		var n uint16
		if err := binary.Read(r, binary.LittleEndian, &n); err != nil {
			return "", err
		}
		data = make([]byte, n)
		if _, err := io.ReadFull(r, data); err != nil {
			return "", err
		}
	}
	return ucs2(data), nil
}
