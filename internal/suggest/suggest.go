// Package suggest finds the name someone most likely meant when they typed one that does not
// exist (a poller's name, an app setting's): the one edit-distance rule behind every "did you
// mean" the product prints.
package suggest

import (
	"strings"
)

// Distance is the Levenshtein distance between a and b, ignoring case: the fewest single-letter
// insertions, deletions and substitutions that turn one into the other.
func Distance(a, b string) int {
	ra, rb := []rune(strings.ToLower(a)), []rune(strings.ToLower(b))
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// Closest returns the candidate nearest to word, if one is near enough to be a slip: at most a
// third of word's length away (at least 1, at most 3 edits), and the only one that near at that
// distance. A candidate equal to word (ignoring case) is returned too.
func Closest(word string, candidates []string) (string, bool) {
	limit := min(max(len([]rune(word))/3, 1), 3)
	best, bestD, tie := "", limit+1, false
	for _, c := range candidates {
		switch d := Distance(word, c); {
		case d < bestD:
			best, bestD, tie = c, d, false
		case d == bestD && !strings.EqualFold(c, best):
			tie = true
		}
	}
	if best == "" || tie {
		return "", false
	}
	return best, true
}

// DidYouMean is " (did you mean NAME?)" for the candidate Closest finds, quoted as quote
// formats it, or "" when there is none.
func DidYouMean(word string, candidates []string, quote func(string) string) string {
	c, ok := Closest(word, candidates)
	if !ok {
		return ""
	}
	return " (did you mean " + quote(c) + "?)"
}
