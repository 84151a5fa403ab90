package postgres

// SetMaxAsk sets the most rows a logical peek asks for (its window) and returns a function that
// puts the default back: tests see windows with a few hundred changes.
func SetMaxAsk(n int) (restore func()) {
	old := maxAsk
	maxAsk = n
	return func() { maxAsk = old }
}
