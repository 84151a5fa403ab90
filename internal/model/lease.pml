/*
 * The lease and checkpoint protocol of package lease (internal/lease/doc.go, internal/lease/lease.go), for spin.
 * README.md in this folder explains every abstraction below and why it hides no bug.
 *
 * Three workers share one state blob whose every write is a compare-and-swap on its ETag.
 * Workers 1 and 2 carry the same owner id (two ticks in one handler process); worker 3 another.
 * The storage service's clock advances on its own, in nondeterministic ticks of one second;
 * Last-Modified is truncated to the second, so it may read up to a tick early. A write may be
 * lost before it lands, or land while its reply is lost; the writer then settles it by
 * re-reading the blob's write id. A worker may crash whenever it is not waiting on a write
 * (a crash with a write in flight is the same as the write landing or not, then the crash),
 * and starts over knowing nothing.
 *
 * Time is relative, so that the state space is finite with neither time nor the number of
 * writes bounded: the blob keeps the age of its Last-Modified (saturated at the expiry bound),
 * each worker the ticks left of its trust window. ETags, write ids and fencing tokens are only
 * ever compared for equality and never reused, so they are kept as the outcomes of the
 * comparisons the workers will make (is my ETag still the blob's? is my token the newest? is
 * the blob's write id that of my write?), which every write updates exactly.
 *
 * Safety (assertions, at every step that can break them):
 *   mutex       no two workers trust a lease at the same instant (also as ltl mutex, -DLTL_MUTEX);
 *   token       no write of a holder (commit, heartbeat, release) lands with a stale token;
 *   checkpoint  no write moves the checkpoint backwards.
 * Liveness (-DLIVE, ltl live, weak fairness, finitely many faults): the checkpoint reaches ROWS.
 *
 * Negative controls, which spin must refute with a trail (see check.sh):
 *   -DNO_CAS        commits are written without the ETag condition;
 *   -DOWNER_CAS     commits are conditional on the owner id alone, not on the ETag or token;
 *   -DPREEMPT       a worker that finds a live lease under its own owner id takes it at once;
 *   -DOWNER_SETTLE  an ambiguous acquire is settled by the owner id instead of the write id;
 *   -DNO_MARGIN     margin 0 and no drift (the configuration refuses a margin below 1 s);
 *   -DDRIFT=2       the holder's window 2 ticks longer than nominal, more than margin 1 covers;
 *   -DSKEW=1 with -DDRIFT=1  the same excess, split between drift and a Date clock running ahead;
 *   -DNO_MUTEX_ASSERT, -DNO_TOKEN_ASSERT switch those assertions off (to show what else fails);
 *   -DLIVE -DSLOW_FOREVER  liveness without eventual timeliness: the clock may always run ahead.
 *
 * Lines printed with "@" narrate a trail (spin -t); verification does not execute them.
 */

#define W     3       /* workers */
#ifndef TTL
#define TTL   3       /* lease TTL in ticks (seconds); Config requires TTL >= 3 * Margin */
#endif
#ifndef M
#define M     1       /* the margin; Config requires >= 1 s, the service clock's resolution */
#endif
#ifndef DRIFT
#define DRIFT 1       /* ticks by which a holder's slow clock may stretch its trust window */
#endif
#ifndef SKEW
#define SKEW  0       /* ticks by which the Date clock may run ahead of the Last-Modified clock */
#endif
#ifdef NO_MARGIN
#undef M
#define M     0
#undef DRIFT
#define DRIFT 0
#endif
#ifndef ROWS
#define ROWS  2       /* batches to commit */
#endif
#define EXP   (TTL + M - SKEW)   /* a contender sees a lease expired once its age >= EXP */
#define WIN   (TTL - M + DRIFT)  /* a holder trusts for WIN ticks from its last good send */

#ifdef LIVE
#ifndef MAXF
#define MAXF  3       /* faults in a run: crashes, lost requests or replies, slow moments */
#endif
byte faults;
#define FAULT   (faults < MAXF) -> faults++
#else
#define FAULT   true
#endif

/* Kinds of a holder's write. */
mtype = { heartbeat, commit, release, commit_release };
/* heartbeat: Heartbeat; commit: Commit; release: Release; commit_release: CommitAndRelease
   (FailAndRelease with progress is the same write). A release ends the lease for this process
   whatever its outcome. */
#define commits(k)  ((k) == commit || (k) == commit_release)
#define releases(k) ((k) == release || (k) == commit_release)

/* The state blob. Its ETag and write id are kept as fresh[] and lastw. */
byte owner;         /* owner id of the lease; 0: never acquired */
byte age = EXP;     /* now - Last-Modified, saturated at EXP; EXP also for released or absent */
byte cp;            /* checkpoint: batches committed */
byte lastw;         /* w: the blob's write id is that of w's write not yet settled; else 0 */

/* What each worker knows, indexed by worker 1..W (index 0 unused). */
bool fresh[W + 1];  /* the ETag w would write with (If-Match) is still the blob's */
bool tokcur[W + 1]; /* w's fencing token is the newest issued */
byte trust[W + 1];  /* ticks left of w's trust window; 0: w trusts no lease */
byte pend[W + 1];   /* ticks left of the window that w's write in flight would give */

byte newcp;         /* scratch within one atomic step; 0 between steps */

#define me    (_pid + 1)               /* workers are pids 0..2 */
#define oid   ((me == 3) -> 2 : 1)     /* workers 1 and 2 share an owner id */

#define NTRUSTING  ((trust[1] > 0) + (trust[2] > 0) + (trust[3] > 0))

inline mutexCheck() {
#ifndef NO_MUTEX_ASSERT
  assert(NTRUSTING <= 1)                /* mutex */
#else
  skip
#endif
}

/* The write lands: Last-Modified is now, truncated, so now or up to a tick before. */
inline stamp() {
  if
  :: age = 0
  :: age = 1
  fi
}

/* Every write that lands makes a new ETag and carries a new write id. */
inline newEtag() {
  fresh[1] = 0; fresh[2] = 0; fresh[3] = 0; fresh[me] = 1; lastw = me
}

/* The acquire lands: owner, token + 1, not released; the checkpoint is the one read. */
inline acquireLands() {
  assert(cpv >= cp);                    /* checkpoint */
  tokcur[1] = 0; tokcur[2] = 0; tokcur[3] = 0; tokcur[me] = 1;
  owner = oid; cp = cpv; stamp(); newEtag();
  printf("@ w%d: acquire lands (owner %d, a new token, Last-Modified %d tick(s) ago)\n", me, oid, age)
}

/* A holder's write lands: the document as the holder last wrote it, with the change. */
inline writeLands() {
  newcp = (commits(kind) -> cpv + 1 : cpv);
  if
  :: tokcur[me] -> printf("@ w%d: its %e lands: cp %d -> %d, its token the newest\n", me, kind, cp, newcp)
  :: else ->       printf("@ w%d: its %e lands: cp %d -> %d, its token STALE\n", me, kind, cp, newcp)
  fi;
  assert(newcp >= cp);                  /* checkpoint: never backwards */
#ifndef NO_TOKEN_ASSERT
  assert(tokcur[me]);                   /* token: no write with a stale fencing token */
#endif
  cp = newcp; newcp = 0; owner = oid;
  if
  :: releases(kind) -> age = EXP        /* released: free at once */
  :: else -> stamp()
  fi;
  newEtag()
}

/* Forget everything: a crash, a lost lease, a lost race, or the end of a tick. */
inline forget() {
  trust[me] = 0; pend[me] = 0; fresh[me] = 0; tokcur[me] = 0;
  if
  :: lastw == me -> lastw = 0
  :: else -> skip
  fi;
  cpv = 0; kind = 0
#ifdef LIVE
  ; hbd = 0
#endif
}

/* Send a write: read the clock; the window it may give runs from now. */
inline send(k) {
  kind = k;
#ifdef LIVE
  if
  :: commits(k) -> hbd = 0
  :: k == heartbeat -> hbd = 1
  :: else -> skip
  fi;
#endif
  if
  :: releases(k) -> trust[me] = 0       /* the holder acts under the lease no more */
#ifdef LIVE
     ; pend[me] = WIN                   /* only to mark the write in flight (BUSY) */
#endif
  :: else -> pend[me] = WIN
  fi;
  printf("@ w%d: sends a %e (cp %d)\n", me, k, (commits(k) -> cpv + 1 : cpv))
}

/* The acquire's outcome known: won. The window runs from the acquire's send. */
inline won() {
  trust[me] = pend[me]; pend[me] = 0; lastw = 0;
  if
  :: trust[me] == 0 ->                  /* its window passed in flight: ended at once */
     printf("@ w%d: won, but its trust window passed in flight: gives up\n", me);
     forget(); goto idle
  :: else ->
     printf("@ w%d: holds the lease (cp %d), trusts it %d more tick(s)\n", me, cpv, trust[me]);
     mutexCheck();
     goto held
  fi
}

/* A holder's write known to have landed: adopt it. The window runs from its send, unless the
   watchdog ended the lease meanwhile (it then stays ended). */
inline adopt() {
  if
  :: trust[me] > 0 -> trust[me] = pend[me]
  :: else -> skip
  fi;
  if
  :: commits(kind) -> cpv++
  :: else -> skip
  fi;
  pend[me] = 0; lastw = 0; kind = 0;
  if
  :: trust[me] == 0 ->
     printf("@ w%d: its write landed (cp %d), but its lease had ended: stops\n", me, cpv);
     forget(); goto idle
  :: else ->
     printf("@ w%d: adopts its write (cp %d), trusts %d more tick(s)\n", me, cpv, trust[me]);
     mutexCheck();
     goto held
  fi
}

/* The condition a holder's write carries. */
#if defined(NO_CAS)
#define CASOK  (fresh[me] || commits(kind))
#elif defined(OWNER_CAS)
#define CASOK  ((!commits(kind) && fresh[me]) || (commits(kind) && owner == oid))
#else
#define CASOK  (fresh[me])
#endif

active [W] proctype Worker() {
  byte cpv;         /* the checkpoint in the document as this worker last read or wrote it */
  mtype kind;       /* of the write in flight; 0: none */
#ifdef LIVE
  bool hbd;         /* a heartbeat since the last commit */
#endif

idle:
  /* Read, peek (on the service's clock), and send the acquire: If-Match on the ETag read. */
  atomic {
    (age >= EXP
#ifdef PREEMPT
     || owner == oid                    /* "it is mine": take it at once */
#endif
    ) ->
    printf("@ w%d: reads owner %d, Last-Modified %d tick(s) ago (live below %d), cp %d\n",
           me, owner, age, EXP, cp);
    fresh[me] = 1; cpv = cp; pend[me] = WIN;
    printf("@ w%d: sends an acquire\n", me)
  };
  /* The acquire lands, or not. */
  atomic {
    if
    :: fresh[me] -> acquireLands();
       if
       :: won()                         /* the reply */
       :: FAULT -> printf("@ w%d: the acquire's reply is lost\n", me); goto settleAcq
       fi
    :: FAULT -> printf("@ w%d: the acquire is lost before it lands\n", me); goto settleAcq
    :: !fresh[me] -> printf("@ w%d: the acquire gets 412\n", me); goto settleAcq
    fi
  };
settleAcq:
  /* Settle by re-reading: our write id there means we won. */
  atomic {
    if
#ifdef OWNER_SETTLE
    :: owner == oid -> printf("@ w%d: re-reads: owner id is ours, so it takes the lease\n", me);
       fresh[me] = 1; tokcur[me] = 1; won()
#else
    :: lastw == me -> printf("@ w%d: re-reads: its write id, so it won\n", me); won()
#endif
    :: else -> printf("@ w%d: re-reads: not its write id, so it lost\n", me); forget(); goto idle
    fi
  };

held:
  do
  :: atomic { trust[me] > 0 && cpv < ROWS -> send(commit); goto write }
  :: atomic { trust[me] > 0 && cpv < ROWS -> send(commit_release); goto write }
#ifdef LIVE
  :: atomic { trust[me] > 0 && !hbd -> send(heartbeat); goto write }
  :: atomic { trust[me] > 0 && cpv == ROWS -> send(release); goto write }
  :: atomic { trust[me] == 0 -> printf("@ w%d: its trust window ended\n", me); forget(); goto idle }
  :: atomic { FAULT -> printf("@ w%d: crashes\n", me); forget(); goto idle }
#else
  :: atomic { trust[me] > 0 -> send(heartbeat); goto write }
  :: atomic { trust[me] > 0 -> send(release); goto write }
  :: atomic { printf("@ w%d: crashes or stops (trust %d)\n", me, trust[me]); forget(); goto idle }
#endif
  od;

write:
  /* The write lands, or not: If-Match on the ETag of our last write. */
  atomic {
    if
    :: CASOK -> writeLands();
       if
       :: releases(kind) -> forget(); goto idle
       :: !releases(kind) -> adopt()    /* the reply */
       :: !releases(kind) && FAULT -> printf("@ w%d: the reply is lost\n", me); goto settle
       fi
    :: FAULT -> printf("@ w%d: the write is lost before it lands\n", me); goto settle
    :: !CASOK -> printf("@ w%d: the write gets 412\n", me); goto settle
    fi
  };
settle:
  /* Settle by re-reading (a release is over for this process whatever the outcome). */
  atomic {
    if
    :: releases(kind) -> forget(); goto idle
    :: !releases(kind) && lastw == me ->                        /* our write id: it landed */
       printf("@ w%d: re-reads: its write id, so it landed\n", me); adopt()
    :: !releases(kind) && lastw != me && !tokcur[me] ->         /* another owner or token */
       printf("@ w%d: re-reads: another token, so the lease is lost\n", me); forget(); goto idle
    :: !releases(kind) && lastw != me && tokcur[me] && fresh[me] ->  /* nothing changed */
       printf("@ w%d: re-reads: unchanged, so it did not land\n", me);
       pend[me] = 0; kind = 0; goto held                        /* may try again */
    :: !releases(kind) && lastw != me && tokcur[me] && !fresh[me] -> /* rewritten under us */
       printf("@ w%d: re-reads: rewritten under its token, so the lease is lost\n", me);
       forget(); goto idle
    fi
  }
}

#define BUSY  (trust[1] + trust[2] + trust[3] + pend[1] + pend[2] + pend[3] > 0)

inline tickw(w) {
  if
  :: trust[w] > 0 -> trust[w]--
  :: else -> skip
  fi;
  if
  :: pend[w] > 0 -> pend[w]--
  :: else -> skip
  fi
}

/* The clock: one tick of the service's clock (and of the holders', DRIFT aside). Only ticks
   that change something are taken; the others are no-ops. */
active proctype Clock() {
  do
  :: d_step {
#if defined(LIVE) && !defined(SLOW_FOREVER)
       /* Workers are eventually timely: a tick while a lease is trusted or a write is in flight
          is a fault (a slow moment), and a run has finitely many faults. */
       ((age < EXP && !BUSY) || (BUSY && faults < MAXF)) ->
       if
       :: BUSY -> faults++
       :: else -> skip
       fi;
#else
       (age < EXP || BUSY) ->
#endif
       if
       :: age < EXP -> age++
       :: else -> skip
       fi;
       tickw(1); tickw(2); tickw(3);
       printf("@ tick: age %d; trust %d %d %d; in flight %d %d %d\n",
              age, trust[1], trust[2], trust[3], pend[1], pend[2], pend[3])
     }
  od
}

#ifdef LIVE
ltl live { <> (cp == ROWS) }
#endif
#ifdef LTL_MUTEX
ltl mutex { [] (NTRUSTING <= 1) }
#endif
