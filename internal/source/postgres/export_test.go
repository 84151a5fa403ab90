package postgres

// SetMaxAsk sets the most rows a logical peek asks for (its window) and returns a function that
// puts the default back: tests see windows with a few hundred changes.
func SetMaxAsk(n int) (restore func()) {
	old := maxAsk
	maxAsk = n
	return func() { maxAsk = old }
}

// SetStreamBounds sets the most changes a following stream holds unfetched and in all, and
// returns a function that puts the defaults back.
func SetStreamBounds(unserved, held int) (restore func()) {
	u, h := streamMaxUnserved, streamMaxHeld
	streamMaxUnserved, streamMaxHeld = unserved, held
	return func() { streamMaxUnserved, streamMaxHeld = u, h }
}

// StreamBuffer says how many changes (and marks) the following stream of f (a logical cursor's
// Follower) holds, and whether it stopped reading because it is full; -1 when none runs.
func StreamBuffer(f any) (held int, paused bool) {
	l, ok := f.(*logical)
	if !ok {
		return -1, false
	}
	s := l.streaming()
	if s == nil {
		return -1, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.buf.rows), s.paused
}

// SetStreamGiveWay sets the size of a transaction from which a following stream gives way to
// peeking, and returns a function that puts the default back.
func SetStreamGiveWay(n int) (restore func()) {
	old := streamGiveWay
	streamGiveWay = n
	return func() { streamGiveWay = old }
}
