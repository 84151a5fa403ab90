// Package bicep reads the structure of Bicep files as text: what the scaffold edits in
// main.bicepparam and what the template tests check.
package bicep

import "strings"

// Mask blanks out the contents of Bicep strings ('...' and ”'...”') and comments, keeping
// the text's length and newlines, so that brackets, braces, colons and keywords inside them do not
// count when a template's or a parameters file's structure is read.
func Mask(text string) string {
	b := []byte(text)
	blank := func(from, to int) {
		for i := max(from, 0); i < to && i < len(b); i++ {
			if b[i] != '\n' && b[i] != '\r' {
				b[i] = ' '
			}
		}
	}
	for i := 0; i < len(text); i++ {
		switch {
		case strings.HasPrefix(text[i:], "'''"):
			end := strings.Index(text[i+3:], "'''")
			if end < 0 {
				end = len(text) - i - 3
			}
			blank(i+3, i+3+end)
			i += 3 + end + 2
		case text[i] == '\'':
			j := i + 1
			for j < len(text) && text[j] != '\'' && text[j] != '\n' {
				if text[j] == '\\' {
					j++
				}
				j++
			}
			blank(i+1, j)
			i = j
		case strings.HasPrefix(text[i:], "//"):
			end := strings.IndexByte(text[i:], '\n')
			if end < 0 {
				end = len(text) - i
			}
			blank(i, i+end)
			i += end
		case strings.HasPrefix(text[i:], "/*"):
			end := strings.Index(text[i+2:], "*/")
			if end < 0 {
				end = len(text) - i - 2
			}
			blank(i, i+2+end+2)
			i += 2 + end + 1
		}
	}
	return string(b)
}
