package pollerstatus

import "github.com/pseudotrigger/pseudotrigger/internal/redact"

// Redact is applied to every free text a Row carries (errors written by handlers and stores), so
// that the status never shows a secret someone quoted (redact.Text).
func Redact(s string) string { return redact.Text(s) }
