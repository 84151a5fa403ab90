/*
 * The lease and checkpoint protocol of package lease (lease/doc.go), for spin.
 *
 * Three workers share one state blob whose every write is a compare-and-swap on its ETag.
 * Workers 1 and 2 carry the same owner id (two ticks in one handler process); worker 3 another.
 * The storage service's clock `now` advances on its own; Last-Modified is truncated to the
 * tick (the service's one-second resolution), so it may read one tick early. A write's reply may
 * be lost: the writer then settles by re-reading the blob's write id. Any worker may crash at any
 * moment and start over with nothing but its owner id.
 *
 * Checked: at most one worker trusts a lease at any instant (ltl mutex); every commit carries
 * the newest fencing token, and the checkpoint never moves backwards (assertions).
 *
 * Negative controls, which spin must refute with a trail:
 *   -DNO_CAS    commits are written without the ETag condition;
 *   -DPREEMPT   a worker that finds a live lease under its own owner id takes it at once
 *               (the "pre-empt the lease at once" optimisation).
 */

#define W     3     /* workers */
#define TTL   3     /* lease TTL, in ticks */
#define M     1     /* the margin: at least one tick */
#define ROWS  2     /* rows to commit */
#define MAXT  6     /* time is bounded to keep the state space finite */
#define MAXW  11    /* so are writes: ETags and write ids never repeat, as in Azure */

byte now;

/* The state blob. */
byte etag;
byte owner;         /* owner id, 0: none */
byte token;         /* fencing token */
byte cp;            /* checkpoint: rows committed */
bool released = true;
byte lm;            /* Last-Modified */
byte wid;           /* write id of the last write */
byte nextwid = 1;

/* What the workers believe, for the properties. */
bool holding[W + 1];
byte trustEnd[W + 1];
byte maxToken;

#define trusts(w)  (holding[w] && now < trustEnd[w])
ltl mutex { [] (trusts(1) + trusts(2) + trusts(3) <= 1) }

/* A fresh write id; none once MAXW writes were made (the worker then stops). */
inline newWid() {
  nextwid < MAXW -> myWid = nextwid; nextwid++
}

/* Last-Modified of a write applied now: the service truncates, so it may be a tick early. */
inline stamp() {
  if
  :: lm = now
  :: now > 0 -> lm = now - 1
  fi
}

proctype Worker(byte me; byte oid) {
  byte rEtag, rToken, rOwner, myEtag, myToken, myCp, sent, myWid;
  byte wEtag, wCp;  /* the ETag and checkpoint our write produced, as its reply returns them */
  bool ok, rReleased;

start:
  holding[me] = false;
  /* Read, and peek at the lease on the service's clock. */
  atomic {
    rEtag = etag; rToken = token; rOwner = owner; rReleased = released;
    if
    :: rOwner != 0 && !rReleased && now < lm + TTL + M ->
#ifdef PREEMPT
       if
       :: rOwner == oid -> skip    /* "it is mine": take it at once */
       :: else -> goto start
       fi
#else
       goto start                  /* held: wait for it to expire */
#endif
    :: else -> skip
    fi
  }
  /* Acquire: CAS on the ETag read, token + 1. */
  atomic { sent = now; newWid() }
  atomic {
    if
    :: etag == rEtag ->
       etag++; owner = oid; token = rToken + 1; released = false; wid = myWid; stamp();
       assert(token > maxToken); maxToken = token; ok = true; wEtag = etag; wCp = cp
    :: else -> ok = false
    fi
  }
  /* The reply, or a lost reply settled by re-reading the write id. */
  atomic {
    if
    :: ok -> skip
    :: true -> ok = (wid == myWid); wEtag = etag; wCp = cp   /* lost reply: settle by re-reading */
    fi;
    if
    :: ok -> myEtag = wEtag; myToken = rToken + 1; myCp = wCp; holding[me] = true; trustEnd[me] = sent + TTL - M
    :: else -> goto start
    fi
  }

  do
  :: myCp < ROWS ->                       /* deliver a batch, then commit it */
     if
     :: now >= trustEnd[me] -> goto start  /* the trust window passed: never commit */
     :: else -> skip
     fi;
     atomic { sent = now; newWid() }
     atomic {
#ifdef NO_CAS
       if
       :: true ->
#else
       if
       :: etag == myEtag ->
#endif
          assert(myCp + 1 >= cp);           /* the checkpoint never moves backwards */
          assert(myToken == maxToken);      /* no commit with a stale fencing token */
          etag++; cp = myCp + 1; owner = oid; token = myToken; wid = myWid; stamp(); ok = true; wEtag = etag
       :: else -> ok = false
       fi
     }
     atomic {
       if
       :: ok -> skip
       :: true -> ok = (wid == myWid); wEtag = etag
       fi;
       if
       :: ok -> myEtag = wEtag; myCp++; trustEnd[me] = sent + TTL - M
       :: !ok && (owner != oid || token != myToken) -> goto start   /* lost */
       :: else -> skip                                             /* did not land: retry */
       fi
     }
  :: atomic { sent = now; newWid() };   /* a heartbeat */
     if
     :: now >= trustEnd[me] -> goto start
     :: else -> skip
     fi;
     atomic {
       if
       :: etag == myEtag -> etag++; wid = myWid; stamp(); ok = true; wEtag = etag
       :: else -> ok = false
       fi
     }
     atomic {
       if
       :: !ok && wid == myWid -> ok = true; wEtag = etag        /* lost reply, settled */
       :: else -> skip
       fi;
       if
       :: ok -> myEtag = wEtag; trustEnd[me] = sent + TTL - M
       :: else -> goto start
       fi
     }
  :: atomic { newWid() };                  /* release */
     atomic {
       if
       :: etag == myEtag -> etag++; released = true; wid = myWid; stamp()
       :: else -> skip
       fi;
       holding[me] = false
     };
     goto start
  :: goto start                            /* crash: nothing survives but the owner id */
  od
}

active proctype Clock() {
  do
  :: now < MAXT -> now++
  :: now == MAXT -> break
  od
}

init {
  atomic {
    run Worker(1, 1);
    run Worker(2, 1);
    run Worker(3, 2)
  }
}
