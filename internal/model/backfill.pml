/*
 * The backfill (issue 29): a poller re-sends the current rows of its table as "read" messages,
 * in key-ordered chunks, between its live batches, with crashes and lease takeovers. For spin.
 * README.md in this folder explains every abstraction below and why it hides no bug.
 *
 * A writer commits NW writes to a table of K keys (update, delete or insert; a key's version is
 * the number of the write that last wrote it, so versions are in commit order; the initial rows
 * have version 0). An operator starts the backfill once, at any moment. One holder at a time
 * (lease.pml proves the lease gives that) runs ticks: each starts from the state document's
 * committed checkpoint and backfill progress, delivers live changes and chunks to the consumer,
 * commits now and then, and crashes (or ends, or loses its lease) at any point, forgetting all
 * it has not committed; the next tick is the next holder. The consumer applies every message in
 * arrival order to its replica, which starts empty (it lost its data).
 *
 * Two ways to decide which rows of a chunk are sent:
 *   default    change-stream cursors (PostgreSQL logical): DBLog watermarks. Emit a low
 *              watermark into the stream, SELECT the next C keys after `after`, emit a high
 *              watermark; keys whose changes the stream shows between the two are dropped from
 *              the chunk; at the high watermark the rest are delivered as reads, and `after`
 *              moves to the chunk's last key.
 *   -DKEYSET   keyset cursors and change tracking: the checkpoint comparison. SELECT the chunk;
 *              a row whose version is after the tick's delivered live position is dropped (the
 *              live poller delivers it later, in order); the others are delivered as reads.
 *              The live side reads current rows (version > position, in version order), one
 *              batch read ahead while the previous one is delivered, as package tick does.
 *              Deletes are invisible to a keyset cursor: it never reports them. With -DCT
 *              (SQL Server change tracking) the live side reports deletes too.
 *
 * Safety (assertions where a message is delivered or the backfill's end is committed):
 *   no-stale-read  (a) a read is never older than a change of its key delivered before it, in
 *                  any tick; (b) within one tick, no change delivered after a read of its key is
 *                  older than the read (a new tick replays changes from the checkpoint, which
 *                  at-least-once delivery allows for every message);
 *   no-skip        when the backfill's end is committed, every key present throughout it was
 *                  delivered since it began, as a read or as a change at least as new as the row
 *                  was at the start (with -DKEYSET: or is newer than the checkpoint, so the live
 *                  stream still owes it);
 *   converge       once the writes are done, the backfill's end committed and the live stream
 *                  caught up, the replica equals the table (with -DKEYSET and no -DCT: its rows
 *                  that exist; a keyset cursor cannot report a delete).
 *
 * Negative controls, which spin must refute with a trail (see check.sh):
 *   -DNO_WINDOW      chunk rows are not filtered by the keys changed between the watermarks;
 *   -DSELECT_FIRST   the chunk is read before the low watermark is emitted;
 *   -DEARLY_AFTER    `after` moves (and may be committed) when the chunk is read, before its
 *                    rows are delivered (logical: before the high watermark is processed);
 *   -DNO_COMPARE     (with -DKEYSET) no checkpoint comparison: every chunk row is delivered;
 *   -DBATCH_BETWEEN  (with -DKEYSET) a live batch may be delivered between a chunk's SELECT and
 *                    the delivery of its rows.
 * Runs that show what the design needs and what it promises (README.md, "Findings"):
 *   -DLAG_CP         a commit may write any checkpoint up to the position (holds: `after` needs
 *                    its chunk delivered, not a checkpoint at or after the high watermark);
 *   -DNO_AHEAD -DNO_COMPARE  (with -DKEYSET) no batch read ahead and no comparison (holds);
 *   -DCMP_AHEAD      (with -DKEYSET) compare with the end of the batch read ahead (holds);
 *   -DSTRICT_END     (with -DKEYSET) no-skip without "or newer than the checkpoint" (refuted);
 *   -DSTRICT_ORDER   no-stale-read (b) across ticks, replays included (refuted).
 *
 * Lines printed with "@" narrate a trail (spin -t); verification does not execute them.
 */

#define K   3       /* keys 1..3, all present at first (fixed: the narration names three) */
#ifndef C
#define C   2       /* keys per chunk */
#endif
#ifndef NW
#define NW  3       /* writes to the table */
#endif

#define bit(k)      (1 << (k))
#define has(s, k)   (((s) & bit(k)) != 0)
#define CV(k)       (has(ch, k) -> cv[k] : -1)    /* for the narration */

/* The table. */
bool pres[K + 1] = 1; /* the key's row exists */
byte ver[K + 1];    /* its version: the write that last wrote it; 0: the initial row */
byte nlog;          /* writes committed; also the newest version */
#ifndef KEYSET
byte lk[NW + 1];    /* the change stream: write i (1..nlog) changed key lk[i] ... */
bool ldel[NW + 1];  /* ... and deleted it */
#endif

/* The state document: what the holder commits with one compare-and-swap. */
byte cp;            /* the live checkpoint: logical, writes delivered; keyset, a version */
byte bf;            /* the backfill: 0 none, 1 running, 2 its end committed */
byte after;         /* keys up to this one are done */

/* The consumer. Its replica, and what the checks need to know about the past. */
byte rep[K + 1];    /* the version the replica holds */
bool rpres[K + 1];  /* the replica has the row */
byte seen[K + 1];   /* the newest version of a change of the key delivered, in any tick */
bool got[K + 1];    /* delivered since the backfill began (a read, or a change >= bfv) */
bool thr[K + 1];    /* present from the backfill's start until now */
byte bfv[K + 1];    /* its version when the backfill started */

/* The running tick's memory, lost when it crashes. */
byte pos;           /* its live position: logical, writes delivered; keyset, a version */
bool tbf;           /* it knew of a running backfill when it started */
byte tafter;        /* the backfill's progress in its memory */
bool tdone;         /* it has processed the last chunk */
bool old;           /* the operator wrote the document after it started: its commits fail */
byte ph;            /* the chunk: 0 none; logical 1 one of low watermark/SELECT done, 2 both,
                       3 high watermark emitted; keyset 2 selected, not yet delivered */
byte ch;            /* the keys in the chunk (a bit set) */
byte cv[K + 1];     /* their versions as read */
byte clast;         /* the chunk's last key: the next `after` */
bool cend;          /* the chunk had fewer than C keys: the last one */
byte lastread[K + 1]; /* the version of the last read of the key in this tick */
#ifndef KEYSET
byte lw, hw;        /* the watermarks' positions: after lw (hw) writes of the stream */
byte wk;            /* keys whose changes the stream showed after the low watermark */
#else
bool fetched;       /* a live batch has been read ahead: ... */
byte ak, av;        /* ... key ak at version av ... */
bool adel;          /* ... deleted (-DCT only) */
#endif

/* A message delivered to the consumer. */
inline deliverRead(k, v) {
  printf("@ consumer: read k%d v%d (replica had %d, newest change seen v%d)\n", k, v, rpres[k], seen[k]);
  assert(v >= seen[k]);                 /* no-stale-read (a): not older than a change seen */
  lastread[k] = v; rep[k] = v; rpres[k] = 1; got[k] = 1
}
inline deliverChange(k, v, del) {
  if
  :: del -> printf("@ consumer: delete k%d v%d\n", k, v)
  :: else -> printf("@ consumer: change k%d v%d\n", k, v)
  fi;
  assert(v >= lastread[k]);             /* no-stale-read (b): not older than this tick's read */
  if
  :: v > seen[k] -> seen[k] = v
  :: else -> skip
  fi;
  rep[k] = v; rpres[k] = !del;
  if
  :: bf != 0 && v >= bfv[k] -> got[k] = 1
  :: else -> skip
  fi
}

/* The SELECT: the next C existing keys after tafter, with their current versions. */
inline selectChunk() {
  n = 0; ch = 0; clast = tafter; k = tafter + 1;
  do
  :: k <= K && n < C ->
     if
     :: pres[k] -> ch = ch | bit(k); cv[k] = ver[k]; n++; clast = k
     :: else -> skip
     fi;
     k++
  :: else -> break
  od;
  cend = (n < C); n = 0; k = 0
}

inline forgetChunk() {
  ch = 0; clast = 0; cend = 0; ph = 0;
  k = 1;
  do
  :: k <= K -> cv[k] = 0; k++
  :: else -> break
  od;
  k = 0
#ifndef KEYSET
  ; lw = 0; hw = 0; wk = 0
#endif
}

#ifdef SELECT_FIRST
#define LOWDONE  (ph >= 2)
#else
#define LOWDONE  (ph >= 1)
#endif

/* The live side has nothing newer than the position (keyset). */
#ifdef CT
#define NEWER(k)  (ver[k] > pos)
#else
#define NEWER(k)  (pres[k] && ver[k] > pos)
#endif

/* The live position a chunk row's version is compared with (keyset). */
#ifdef CMP_AHEAD
#define POSITION  (fetched -> av : pos)  /* the end of the batch read ahead, if any */
#else
#define POSITION  pos                    /* the end of the last batch delivered */
#endif

/* A key the backfill must have delivered by its end. */
#if defined(KEYSET) && !defined(STRICT_END)
#define delivered(k)  (got[k] || ver[k] > cp)
#else
#define delivered(k)  (got[k])
#endif

active proctype Writer() {
  byte k;
end:
  do
  :: atomic {
       nlog < NW ->
       k = 1;
       do
       :: k < K -> k++
       :: break
       od;
       nlog++;
       if
       :: pres[k] -> printf("@ writer: update k%d v%d\n", k, nlog)
       :: pres[k] -> printf("@ writer: delete k%d v%d\n", k, nlog); pres[k] = 0;
          if
          :: bf == 1 -> thr[k] = 0
          :: else -> skip
          fi
       :: !pres[k] -> printf("@ writer: insert k%d v%d\n", k, nlog); pres[k] = 1
       fi;
       ver[k] = nlog;
#ifndef KEYSET
       lk[nlog] = k; ldel[nlog] = !pres[k];
#endif
       k = 0
     }
  :: atomic {
       bf == 0 ->                       /* the operator starts the backfill */
       bf = 1; after = 0; old = 1;
       k = 1;
       do
       :: k <= K -> bfv[k] = ver[k]; thr[k] = pres[k]; got[k] = 0; k++
       :: else -> break
       od;
       k = 0;
       printf("@ operator: starts the backfill (a tick already running can commit no more)\n")
     }
  od
}

active proctype Holder() {
  byte k, n;
start:
  atomic {
    pos = cp; tbf = (bf == 1); tafter = after; tdone = 0; old = 0;
#ifndef STRICT_ORDER
    k = 1;
    do
    :: k <= K -> lastread[k] = 0; k++
    :: else -> break
    od;
    k = 0;
#endif
#ifdef KEYSET
    fetched = 0; ak = 0; av = 0; adel = 0;
#endif
    printf("@ holder: a tick starts: checkpoint %d, backfill %d, after k%d\n", cp, bf, after)
  };
  do
#ifndef KEYSET
  /* Deliver the stream's next change, past the chunk's high watermark too: the tick hands the
     reads over after the live batch that passes it, which may hold later changes. */
  :: atomic {
       pos < nlog ->
       pos++;
       if
       :: LOWDONE && pos > lw -> wk = wk | bit(lk[pos])    /* inside the window */
       :: else -> skip
       fi;
       deliverChange(lk[pos], pos, ldel[pos])
     }
#ifndef SELECT_FIRST
  /* The low watermark, the SELECT, the high watermark. */
  :: atomic { tbf && !tdone && ph == 0 -> lw = nlog; ph = 1;
       printf("@ holder: emits a low watermark (after write %d)\n", lw) }
  :: atomic { ph == 1 -> selectChunk(); ph = 2;
#else
  :: atomic { tbf && !tdone && ph == 0 -> selectChunk(); ph = 1;
#endif
       printf("@ holder: SELECTs the chunk after k%d: versions k1 %d, k2 %d, k3 %d (-1: not in it)\n",
              tafter, CV(1), CV(2), CV(3));
#ifdef EARLY_AFTER
       tafter = clast;
#endif
       skip }
#ifdef SELECT_FIRST
  :: atomic { ph == 1 -> lw = nlog; ph = 2;
       printf("@ holder: emits a low watermark (after write %d)\n", lw) }
#endif
  :: atomic { ph == 2 -> hw = nlog; ph = 3;
       printf("@ holder: emits a high watermark (after write %d)\n", hw) }
  /* At or past the high watermark: the chunk's rows not changed since the low one, as reads. */
  :: atomic {
       ph == 3 && pos >= hw ->
       printf("@ holder: at the high watermark; changed in the window: k1 %d, k2 %d, k3 %d\n",
              has(wk, 1), has(wk, 2), has(wk, 3));
       k = 1;
       do
       :: k <= K ->
          if
#ifndef NO_WINDOW
          :: has(ch, k) && !has(wk, k) -> deliverRead(k, cv[k])
#else
          :: has(ch, k) -> deliverRead(k, cv[k])
#endif
          :: else -> skip
          fi;
          k++
       :: else -> break
       od;
       tafter = clast; tdone = cend; forgetChunk()
     }
#else /* KEYSET */
  /* Read the next live batch ahead (one row: the oldest version after the position). */
  :: atomic {
#ifndef NO_AHEAD
       !fetched ->
#else
       ph == 0 ->
#endif
       k = 1;
       do
       :: k <= K ->
          if
          :: NEWER(k) && (!fetched || ver[k] < av) ->
             fetched = 1; ak = k; av = ver[k]; adel = !pres[k]
          :: else -> skip
          fi;
          k++
       :: else -> break
       od;
       k = 0;
       if
       :: fetched -> printf("@ holder: reads a live batch ahead: k%d v%d\n", ak, av)
       :: else -> skip                  /* nothing new: the same state, no new step */
       fi
#ifdef NO_AHEAD
       ;
       if                               /* ... and delivers it at once */
       :: fetched -> deliverChange(ak, av, adel); pos = av; fetched = 0; ak = 0; av = 0; adel = 0
       :: else -> skip
       fi
#endif
     }
  /* Deliver it: not between a chunk's SELECT and its delivery. */
  :: atomic {
#ifndef BATCH_BETWEEN
       fetched && ph == 0 ->
#else
       fetched ->
#endif
       deliverChange(ak, av, adel); pos = av;
       fetched = 0; ak = 0; av = 0; adel = 0
     }
  /* The SELECT and the checkpoint comparison. */
  :: atomic {
       tbf && !tdone && ph == 0 ->
       selectChunk(); ph = 2;
       printf("@ holder: SELECTs the chunk after k%d: versions k1 %d, k2 %d, k3 %d (-1: not in it); position %d\n",
              tafter, CV(1), CV(2), CV(3), pos);
#ifndef NO_COMPARE
       k = 1;
       do
       :: k <= K ->
          if
          :: has(ch, k) && cv[k] > POSITION ->
             printf("@ holder: drops k%d (v%d is after the position)\n", k, cv[k]);
             ch = ch & ~bit(k); cv[k] = 0
          :: else -> skip
          fi;
          k++
       :: else -> break
       od;
       k = 0;
#endif
#ifdef EARLY_AFTER
       tafter = clast;
#endif
       skip
     }
  /* Deliver the chunk's rows as reads. */
  :: atomic {
       ph == 2 ->
       k = 1;
       do
       :: k <= K ->
          if
          :: has(ch, k) -> deliverRead(k, cv[k])
          :: else -> skip
          fi;
          k++
       :: else -> break
       od;
       tafter = clast; tdone = cend; forgetChunk()
     }
#endif
  /* Commit the position and the backfill's progress together (only what changes something). */
  :: atomic {
       !old && (pos != cp || tafter != after || (tdone && bf == 1)) ->
#ifndef LAG_CP
       n = pos;
#else
       n = cp;                          /* any checkpoint up to the position */
       do
       :: n < pos -> n++
       :: break
       od;
#endif
       printf("@ holder: commits checkpoint %d, after k%d, end of the backfill %d\n", n, tafter, tdone && bf == 1);
       cp = n; after = tafter; n = 0;
       if
       :: tdone && bf == 1 ->
          bf = 2;
          k = 1;
          do
          :: k <= K -> assert(!thr[k] || delivered(k)); k++    /* no-skip */
          :: else -> break
          od;
          k = 0
       :: else -> skip
       fi
     }
  /* Crash, end, or lose the lease: the next tick (this holder or another) starts afresh. */
  :: atomic {
       printf("@ holder: the tick crashes or ends (position %d, chunk phase %d)\n", pos, ph);
       forgetChunk(); tafter = 0; tdone = 0; tbf = 0; pos = 0;
       goto start
     }
  /* converge: writes done, the backfill's end committed, the live stream caught up. */
#ifndef KEYSET
  :: atomic {
       nlog == NW && bf == 2 && pos == nlog && ph == 0 ->
#else
  :: atomic {
       nlog == NW && bf == 2 && ph == 0 && !fetched &&
       !NEWER(1) && !NEWER(2) && !NEWER(3) ->
#endif
       k = 1;
       do
       :: k <= K ->
#if defined(KEYSET) && !defined(CT)
          assert(!pres[k] || (rpres[k] && rep[k] == ver[k]));         /* converge */
#else
          assert(pres[k] == rpres[k] && (!pres[k] || rep[k] == ver[k])); /* converge */
#endif
          k++
       :: else -> break
       od;
       k = 0;
       printf("@ holder: converged\n");
       goto start                       /* (a new tick: nothing else can happen now) */
     }
  od
}
