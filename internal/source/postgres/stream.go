package postgres

// Following by streaming (driver.Follower): once a tick holding the lease has caught up by
// peeking, it streams the slot with the replication protocol instead of peeking again every
// {P}_FOLLOW_INTERVAL, which would make the server decode again every change since the last
// commit (up to {P}_FOLLOW_COMMIT of them) ten times a second.
//
// The stream is a replication connection (replication=database, configured as the pool's own
// connections are, a fresh Entra ID token included: replConfigs) that runs START_REPLICATION
// from the checkpoint's LSN with the peek's pgoutput options, once the slot is found not past
// the checkpoint (else ErrSlotAhead). A transaction larger than streamGiveWay changes makes the
// stream give way: it closes, the next fetch reads that transaction by peeking (the walsender
// sends a large transaction 4-6 times slower than a peek reads it), and the next pause, caught
// up, streams again. One goroutine (run) owns the connection: it
// decodes the messages with the peek's decoder (relation messages come once per session, and the
// decoder keeps them) into a buffer of whole transactions, answers keepalives and sends a
// standby status update at least every streamStatusEvery, and whenever a commit moved the
// position to confirm. The position it confirms (write = flush = apply) is only ever the
// checkpoint the state blob holds (Committed), never what was received: the blob is the truth,
// and a stream that ends without a commit leaves the slot where the last commit put it.
//
// While it streams, the slot is active (held by the stream's walsender): Fetch, Waiting and
// Committed go through the stream, since a peek or pg_replication_slot_advance would fail on it
// (55006). Another process's peek finds it busy (driver.BusyError), which a tick takes for a held
// lease and the status's probe for a slot being read by a following tick. The buffer holds at
// most streamMaxUnserved changes not yet fetched and streamMaxHeld in all: beyond, the goroutine
// stops reading (the server's sends wait in the socket) until a fetch or a commit makes room.
// The changes up to the committed checkpoint (and fetched) are dropped from it.
//
// EndFollow ends the stream: a last status update with the committed position, then CopyDone,
// and the server's end of the command (by then it has released the slot), then the connection
// closes. The tick ends it before its last write (the release), so that the next holder finds
// the slot inactive; that write's checkpoint then moves the slot by pg_replication_slot_advance.
//
// Hold keeps it instead, for the next tick of this process, when the schedule fires again
// shortly after the follow ends: starting a stream costs the walsender a read of the WAL from
// the slot's restart point, which PostgreSQL moves only at the running-transactions record it
// logs every 15 s, so a restart decodes up to 15 s of WAL before it sends anything (at 10,000
// changes a second, the next tick's changes arrived 1.3 s late, and the lag took 3 s to drain;
// docs/follow.md). The held stream goes on receiving, the last write's checkpoint is confirmed
// through it, and the next tick's fetches read from it; its Await takes it over. Not taken over
// within the hold, it ends as EndFollow ends it. Meanwhile another process finds the slot busy,
// as while a tick follows.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pseudotrigger/pseudotrigger/internal/redact"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres/pgcdc"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// The stream's bounds; variables for the tests (export_test.go).
var (
	// streamStatusEvery is the longest time between two standby status updates: the server's
	// wal_sender_timeout (60 s by default) ends a stream whose reader says nothing for that long.
	streamStatusEvery = time.Second
	// streamMaxUnserved bounds the changes received and not yet fetched, streamMaxHeld those
	// held in all (fetched, not yet committed, included): beyond either the stream stops reading.
	streamMaxUnserved = 1 << 14
	streamMaxHeld     = 1 << 17
	// streamGiveWay is the size (in changes) of a transaction from which the stream gives way to
	// peeking: the walsender sends a large transaction 4-6 times slower than a peek reads it
	// (docs/performance.md), so a following tick catches up on it by peeking, as any tick does,
	// and streams again once caught up.
	streamGiveWay = 4096
	// streamStartBehind is the most WAL flushed since the last peek (what the walsender would
	// decode before it sends anything new) with which a stream starts: with more, the next fetch
	// peeks first (a peek decodes a backlog 4-6 times faster than the walsender sends it).
	streamStartBehind int64 = 4 << 20
	// streamSoonEvery bounds how often an Await without a wait tries to start a stream, and
	// streamSoonLeft is the most changes the last peek may still hold after the cursor then (the
	// stream would send them again, slower than they are served from memory).
	streamSoonEvery = 100 * time.Millisecond
	streamSoonLeft  = 1024
	// streamRetryAfter is how long a follow peeks as before after a stream could not start or
	// broke, before it tries one again.
	streamRetryAfter = 30 * time.Second
)

// streamHoldMax is the longest a stream is held for the next tick (Hold): longer, it ends.
const streamHoldMax = 15 * time.Second

// streamSenderTimeout is the stream's wal_sender_timeout: how long the server keeps the slot for a
// reader that says nothing.
const streamSenderTimeout = 15 * time.Second

// streamEndTimeout bounds a stream's end (its last status update, CopyDone and the server's
// answer) and its start.
const streamEndTimeout = 5 * time.Second

// busyHolder is how a BusyError names a stream that holds the slot.
const busyHolder = "a following tick streaming the replication slot"

// errStreamEnded is the error of a stream after EndFollow; errGiveWay of one that gave way to
// peeking (streamGiveWay).
var (
	errStreamEnded = errors.New("the stream was ended")
	errGiveWay     = errors.New("a large transaction: read by peeking")
	errPeekFirst   = errors.New("much WAL since the last peek: peek first")
)

// stream is a following tick's stream of the slot.
type stream struct {
	l    *logical
	conn *pgconn.PgConn
	from pglogrepl.LSN // the slot's confirmed position when it started: the stream starts there

	mu      sync.Mutex
	buf     *peeked        // the transactions received, whole, from from (first: what was dropped)
	d       *decoder       // decodes into buf; used by run only, under mu
	served  pgcdc.Position // the furthest position fetched (or awaited) after
	confirm pglogrepl.LSN  // the committed checkpoint's LSN: what the status updates confirm
	err     error          // why it stopped (errStreamEnded after EndFollow); nil while it runs
	ending  bool           // EndFollow asked it to end
	paused  bool           // it stopped reading: the buffer is full
	arrived chan struct{}  // closed (and replaced) when transactions arrive, or when it stops
	woken   bool           // wake was called: run looks at the state again
	wakeCh  chan struct{}  // wakes run while it waits for room (buffered, 1)
	done    chan struct{}  // closed when run returned (the connection is closed)
	endErr  error          // what went wrong ending it
}

// streaming is the stream a following tick streams, nil when none.
func (l *logical) streaming() *stream {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.st
}

// dropStream forgets s, which stopped, and waits a while before starting another unless it gave
// way to peeking (then the next pause, once caught up, streams again).
func (l *logical) dropStream(s *stream) {
	<-s.done
	l.mu.Lock()
	if l.st == s {
		l.st = nil
		if !errors.Is(s.err, errGiveWay) {
			l.noStreamUntil = time.Now().Add(streamRetryAfter)
		}
	}
	l.mu.Unlock()
}

// Hold keeps the stream, if one runs, for the next tick of this process for at most d
// (driver.Follower); see the top of the file.
func (l *logical) Hold(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.st
	if s == nil {
		return
	}
	d = min(max(d, 0), streamHoldMax)
	if l.held != nil {
		l.held.Stop()
	}
	l.held = time.AfterFunc(d, func() { l.endHeld(s) })
}

// endHeld ends s, held for a tick that did not come (Hold).
func (l *logical) endHeld(s *stream) {
	l.mu.Lock()
	if l.st != s || l.held == nil {
		l.mu.Unlock()
		return
	}
	l.st, l.held, l.ended = nil, nil, s.done
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), streamEndTimeout)
	defer cancel()
	_ = s.end(ctx) // its connection is closed regardless
}

// takeOver makes a held stream (Hold) the tick's when take (Await): it no longer ends when the
// hold passes. Taken or not (a Fetch), a held stream that does not hold the changes after pos
// (the checkpoint was moved by another way) ends, and the tick reads as without it.
func (l *logical) takeOver(ctx context.Context, resume bool, pos pgcdc.Position, take bool) {
	l.mu.Lock()
	s, held := l.st, l.held
	if held == nil {
		l.mu.Unlock()
		return
	}
	s.mu.Lock()
	covers := s.buf.covers(resume, pos)
	s.mu.Unlock()
	if covers && !take {
		l.mu.Unlock()
		return
	}
	held.Stop()
	l.held = nil
	if covers {
		l.mu.Unlock()
		return
	}
	l.st, l.ended = nil, s.done
	l.mu.Unlock()
	_ = s.end(ctx) // its connection is closed regardless
}

// Await waits for a change after the cursor, streaming the slot (driver.Follower).
func (l *logical) Await(ctx context.Context, after *state.Cursor, d time.Duration) (bool, error) {
	pos, err := l.position(after)
	if err != nil {
		return false, err
	}
	resume := after != nil
	l.takeOver(ctx, resume, pos, true)
	l.mu.Lock()
	s, retry := l.st, l.noStreamUntil
	c := l.cache
	notYet := d <= 0 && s == nil && (time.Now().Before(retry) || time.Now().Before(l.nextSoon) ||
		!c.covers(resume, pos) || !c.complete || time.Since(c.at) > time.Second || len(c.rows)-c.after(pos) > streamSoonLeft)
	if d <= 0 && s == nil && !notYet {
		l.nextSoon = time.Now().Add(streamSoonEvery)
	}
	l.mu.Unlock()
	if d <= 0 && (s != nil || notYet) { // streaming already, or not yet
		return s != nil, nil
	}
	if s == nil && time.Now().Before(retry) { // peeking for a while: wait as without a stream
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		return false, nil
	}
	if s == nil {
		var since pglogrepl.LSN // the WAL the last peek read up to, if it serves pos
		if c := l.cached(); c.covers(resume, pos) {
			since = c.flushed
		}
		s, err = l.startStream(ctx, resume, pos, since)
		if errors.Is(err, errPeekFirst) {
			return d > 0, nil // the next fetch peeks
		}
		if err != nil {
			l.mu.Lock()
			l.noStreamUntil = time.Now().Add(streamRetryAfter)
			l.mu.Unlock()
			return false, fmt.Errorf("source: poller %q: streaming replication slot %q: %w", l.poller, l.slot, err)
		}
		l.mu.Lock()
		l.st = s
		l.mu.Unlock()
	}
	if d <= 0 {
		return true, nil
	}
	ok, err := s.await(ctx, pos, d)
	if err != nil {
		l.dropStream(s)
		if errors.Is(err, errGiveWay) {
			return true, nil // the next fetch peeks
		}
		return false, fmt.Errorf("source: poller %q: the stream of replication slot %q broke: %w", l.poller, l.slot, err)
	}
	return ok, nil
}

// EndFollow ends the stream, if one runs (driver.Follower).
func (l *logical) EndFollow(ctx context.Context) error {
	l.mu.Lock()
	s := l.st
	l.st = nil
	if l.held != nil {
		l.held.Stop()
		l.held = nil
	}
	l.mu.Unlock()
	if s == nil {
		return nil
	}
	if err := s.end(ctx); err != nil {
		return fmt.Errorf("source: poller %q: ending the stream of replication slot %q: %w", l.poller, l.slot, err)
	}
	return nil
}

// cached is the last peek, nil when none.
func (l *logical) cached() *peeked {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cache
}

// startStream checks that the slot is not past the checkpoint pos (when resume) and starts
// streaming it; or, when more than streamStartBehind of WAL was flushed since since (the last
// peek's), it says errPeekFirst.
func (l *logical) startStream(ctx context.Context, resume bool, pos pgcdc.Position, since pglogrepl.LSN) (*stream, error) {
	ctx, cancel := context.WithTimeout(ctx, streamEndTimeout)
	defer cancel()
	var confirmed sql.NullString
	var behind int64
	err := l.lay.DB().QueryRowContext(ctx, "SELECT confirmed_flush_lsn::text, (pg_current_wal_flush_lsn() - $2::pg_lsn)::int8 FROM pg_replication_slots WHERE slot_name = $1",
		l.slot, since.String()).Scan(&confirmed, &behind)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, l.fail("replication slot %q does not exist (any more): run `pollerctl cdc enable %s --yes`", l.slot, l.poller)
	case err != nil:
		return nil, l.lay.Errorf("reading replication slot %q: %v", l.slot, err)
	case !confirmed.Valid:
		return nil, l.fail("replication slot %q has no confirmed position", l.slot)
	}
	from, err := pglogrepl.ParseLSN(confirmed.String)
	if err != nil {
		return nil, l.lay.Errorf("slot %q: confirmed position %q: %v", l.slot, confirmed.String, err)
	}
	if resume && from > pos.LSN {
		return nil, l.slotAhead(from, pos)
	}
	if behind > streamStartBehind {
		return nil, errPeekFirst
	}
	cfg, err := l.replicationConfig(ctx)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	ended := l.ended
	l.mu.Unlock()
	if ended != nil { // a held stream's end: the slot is free once it returned
		select {
		case <-ended:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	l.peekMu.Lock() // no peek of this process while the stream takes the slot (a read ahead's)
	defer l.peekMu.Unlock()
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, l.lay.Errorf("opening a replication connection: %s", redact.Text(err.Error()))
	}
	opts := []string{"proto_version '1'", "publication_names '" + strings.ReplaceAll(l.pub, "'", "''") + "'"}
	if l.messages {
		opts = append(opts, "messages 'true'")
	}
	// From the checkpoint's LSN: the server passes over the transactions whose commit record
	// starts before it (those the checkpoint has done: it is past their commit, a transaction's
	// end), and sends from there; a transaction the checkpoint is inside of (its commit's LSN
	// and a count of changes) comes whole, and the changes up to pos are dropped here as
	// after(pos) drops them from a peek. Without a checkpoint, from the slot's position (0/0).
	var start pglogrepl.LSN
	if resume {
		start = pos.LSN
	}
	err = pglogrepl.StartReplication(ctx, conn, l.slot, start, pglogrepl.StartReplicationOptions{Mode: pglogrepl.LogicalReplication, PluginArgs: opts})
	if err != nil {
		cctx, ccancel := context.WithTimeout(context.Background(), time.Second)
		_ = conn.Close(cctx)
		ccancel()
		return nil, l.peekErr(err)
	}
	s := &stream{l: l, conn: conn, from: from, confirm: from, arrived: make(chan struct{}), done: make(chan struct{}), wakeCh: make(chan struct{}, 1)}
	s.buf = &peeked{from: from, complete: true, at: time.Now()}
	if resume {
		s.buf.first = pos // nothing before it was sent
	}
	s.d = l.newDecoder(s.buf)
	go s.run()
	return s, nil
}

// replicationConfig is the configuration of a replication connection to the pool's database.
func (l *logical) replicationConfig(ctx context.Context) (*pgconn.Config, error) {
	var cfg *pgconn.Config
	if f, ok := replConfigOf(l.lay.DB()); ok {
		c, err := f(ctx)
		if err != nil {
			return nil, l.lay.Errorf("configuring a replication connection: %s", redact.Text(err.Error()))
		}
		cfg = c
	} else { // a pool openPostgres did not open (tests): a connection of it says its configuration
		c, err := l.lay.DB().Conn(ctx)
		if err != nil {
			return nil, l.lay.Errorf("configuring a replication connection: %s", redact.Text(err.Error()))
		}
		defer c.Close()
		err = c.Raw(func(dc any) error {
			pc, ok := dc.(interface{ Conn() *pgx.Conn })
			if !ok {
				return l.lay.Errorf("configuring a replication connection: the connection is a %T, not pgx's", dc)
			}
			cfg = pc.Conn().Config().Config.Copy()
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["replication"] = "database"
	// A follower that freezes or vanishes without closing its connection holds the slot until the
	// server gives up on it: the next owner of the lease reads the slot this long after at most,
	// not the server's default minute. Healthy, the stream says something every second
	// (streamStatusEvery). Settable per connection since PostgreSQL 12.
	cfg.RuntimeParams["wal_sender_timeout"] = strconv.Itoa(int(streamSenderTimeout / time.Millisecond))
	return cfg, nil
}

// run reads the stream until it ends or breaks (see the top of the file). Its receives wait on
// the connection's read deadline, the next status update's time, which wake moves to now: a
// receive under a context would start a goroutine per message (pgconn's context watcher).
func (s *stream) run() {
	defer close(s.done)
	next := time.Now() // the next status update is due
	var sent pglogrepl.LSN
	var deadline time.Time // the read deadline set
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		s.mu.Lock()
		if s.woken || !deadline.Equal(next) {
			s.woken, deadline = false, next
			_ = s.conn.Conn().SetReadDeadline(next)
		}
		ending, confirm := s.ending, s.confirm
		s.paused = s.full()
		paused := s.paused
		s.mu.Unlock()
		if ending {
			s.finish(confirm)
			return
		}
		if confirm != sent || !time.Now().Before(next) {
			if err := s.status(confirm); err != nil {
				s.stop(err)
				return
			}
			sent, next = confirm, time.Now().Add(streamStatusEvery)
			continue
		}
		if paused { // full: read nothing until a fetch or a commit makes room, or a status is due
			timer.Reset(time.Until(next))
			select {
			case <-s.wakeCh:
			case <-timer.C:
			}
			continue
		}
		msg, err := s.conn.ReceiveMessage(context.Background())
		if err != nil {
			if pgconn.Timeout(err) && !s.conn.IsClosed() {
				continue // woken, or a status update is due
			}
			s.stop(err)
			return
		}
		switch m := msg.(type) {
		case *pgproto3.CopyData:
			if len(m.Data) == 0 {
				continue
			}
			switch m.Data[0] {
			case pglogrepl.PrimaryKeepaliveMessageByteID:
				k, err := pglogrepl.ParsePrimaryKeepaliveMessage(m.Data[1:])
				if err != nil {
					s.stop(err)
					return
				}
				if k.ReplyRequested {
					next = time.Now()
				}
			case pglogrepl.XLogDataByteID:
				x, err := pglogrepl.ParseXLogData(m.Data[1:])
				if err == nil {
					err = s.message(x.WALData)
				}
				if err != nil {
					s.stop(err)
					return
				}
			}
		case *pgproto3.ErrorResponse:
			s.stop(pgconn.ErrorResponseToPgError(m))
			return
		case *pgproto3.CopyDone:
			s.stop(errors.New("the server ended the stream"))
			return
		}
	}
}

// wake makes run look at the state again (under mu): an end asked for, a position to confirm,
// room in the buffer.
func (s *stream) wake() {
	s.woken = true
	select {
	case s.wakeCh <- struct{}{}:
	default:
	}
	_ = s.conn.Conn().SetReadDeadline(time.Now())
}

// message decodes a pgoutput message into the buffer, and tells Await when a transaction
// arrived whole.
func (s *stream) message(data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.buf.rows)
	err := s.d.message(data)
	if len(s.buf.rows) > n {
		close(s.arrived)
		s.arrived = make(chan struct{})
	}
	if err == nil && s.d.tx != nil && len(s.d.tx.entries) > streamGiveWay {
		return errGiveWay
	}
	return err
}

// status sends a standby status update confirming the committed position.
func (s *stream) status(confirm pglogrepl.LSN) error {
	return pglogrepl.SendStandbyStatusUpdate(context.Background(), s.conn,
		pglogrepl.StandbyStatusUpdate{WALWritePosition: confirm, WALFlushPosition: confirm, WALApplyPosition: confirm})
}

// stop notes why the stream stopped, and closes its connection (the server then releases the
// slot).
func (s *stream) stop(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
		close(s.arrived)
	}
	s.wake()
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = s.conn.Close(ctx)
}

// finish ends the stream cleanly: a last status update with the committed position, then
// CopyDone, and the server's answer up to ReadyForQuery (the server has processed the status
// update and released the slot by then); then the connection closes.
func (s *stream) finish(confirm pglogrepl.LSN) {
	err := s.conn.Conn().SetDeadline(time.Now().Add(streamEndTimeout))
	if err == nil {
		err = s.status(confirm)
	}
	if err == nil {
		_, err = pglogrepl.SendStandbyCopyDone(context.Background(), s.conn)
	}
	s.mu.Lock()
	s.endErr = err
	s.mu.Unlock()
	s.stop(errStreamEnded)
}

// end asks run to end the stream and waits until it has.
func (s *stream) end(ctx context.Context) error {
	s.mu.Lock()
	s.ending = true
	s.wake()
	s.mu.Unlock()
	select {
	case <-s.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.endErr
}

// full says the buffer holds as much as it may: the stream stops reading.
func (s *stream) full() bool {
	n := len(s.buf.rows)
	return n >= streamMaxHeld || n-s.buf.after(s.served) >= streamMaxUnserved
}

// wantsCommit says the stream holds all it may and has served it all: only a commit makes room.
func (s *stream) wantsCommit() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err == nil && len(s.buf.rows) >= streamMaxHeld && s.buf.after(s.served) == len(s.buf.rows)
}

// sawUpTo notes that the reader is past pos, and wakes run if that made room.
func (s *stream) sawUpTo(pos pgcdc.Position) {
	if s.served.Before(pos) {
		s.served = pos
	}
	if s.paused && !s.full() {
		s.wake()
	}
}

// await waits at most d until a change after pos is in the buffer; an error when the stream
// stopped.
func (s *stream) await(ctx context.Context, pos pgcdc.Position, d time.Duration) (bool, error) {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		s.mu.Lock()
		err := s.err
		s.sawUpTo(pos)
		n := len(s.buf.pos)
		ready := n > 0 && pos.Before(s.buf.pos[n-1])
		ch := s.arrived
		s.mu.Unlock()
		switch {
		case err != nil:
			return false, err
		case ready:
			return true, nil
		}
		select {
		case <-ch:
		case <-t.C:
			return false, nil
		case <-ctx.Done():
			return false, nil
		}
	}
}

// fetch serves up to limit changes after pos from the buffer (after is pos as a cursor). It says
// false (and nothing) when the stream stopped: the caller reads as without it. A position whose
// changes were dropped (committed since) is busy: the stream holds the slot.
func (s *stream) fetch(after *state.Cursor, pos pgcdc.Position, limit int) (*row.Batch, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, false, nil
	}
	if !s.buf.covers(after != nil, pos) {
		return nil, true, s.busy(fmt.Sprintf("the changes after %s were delivered and committed since", pos))
	}
	b, to, err := s.l.batch(s.buf, s.buf.after(pos), after, limit)
	if err == nil {
		s.sawUpTo(pos)
		if b.To != nil {
			s.sawUpTo(to)
		}
	}
	return b, true, err
}

// waiting counts up to limit changes after pos in the buffer (all it holds when pos is before
// it: a checkpoint older than the stream's commits); false when the stream stopped.
func (s *stream) waiting(resume bool, pos pgcdc.Position, limit int) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return 0, false
	}
	i := 0
	if s.buf.covers(resume, pos) {
		i = s.buf.after(pos)
	}
	n := 0
	for _, c := range s.buf.rows[i:] {
		if c != nil {
			n++
		}
	}
	return int64(min(n, limit)), true
}

// committed notes that the checkpoint pos is in the state blob: the next status update confirms
// it, and the changes up to it (fetched) are dropped. It says false when the stream stopped (the
// caller advances the slot as without it).
func (s *stream) committed(pos pgcdc.Position) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return false
	}
	if pos.LSN > s.confirm {
		s.confirm = pos.LSN
		s.wake()
	}
	upTo := pos
	if s.served.Before(upTo) {
		upTo = s.served
	}
	s.trim(upTo)
	return true
}

// trim drops the buffer's changes up to pos.
func (s *stream) trim(pos pgcdc.Position) {
	p := s.buf
	i := p.after(pos)
	if i == 0 {
		return
	}
	p.first = p.pos[i-1]
	clear(p.rows[:i])
	p.rows, p.pos = p.rows[i:], p.pos[i:]
	if len(p.stops) > 0 {
		stops := map[int]error{}
		for k, err := range p.stops {
			if k >= i {
				stops[k-i] = err
			}
		}
		p.stops = stops
	}
	if s.paused && !s.full() {
		s.wake()
	}
}

// busy is the BusyError of a read the stream cannot serve.
func (s *stream) busy(why string) error {
	return &driver.BusyError{Holder: busyHolder, Err: fmt.Errorf("source: poller %q, slot %q: %w: it is being read by a following tick (%s)", s.l.poller, s.l.slot, driver.ErrBusy, why)}
}
