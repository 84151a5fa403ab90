package pollerstatus

import (
	"fmt"
	"strconv"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// FollowText is a following tick's progress in words, as the page and pollerctl status show
// it: since when, until when, the changes delivered and their latency.
func FollowText(f *state.Follow, now time.Time) string {
	line := fmt.Sprintf("following since %s (%s), until %s: %d changes delivered", f.Since.UTC().Format(time.RFC3339),
		DurationText(now.Sub(f.Since.Time).Seconds()), f.Until.UTC().Format(time.RFC3339), f.Changes)
	if f.LatencyP50MS != nil && f.LatencyP95MS != nil {
		line += ", commit to delivery p50 " + msText(*f.LatencyP50MS) + " and p95 " + msText(*f.LatencyP95MS) + " over the last minute"
	} else {
		line += " (latency not measured: none in the last minute, or the cursor kind carries no commit time)"
	}
	return line
}

func msText(ms float64) string { return strconv.FormatFloat(ms, 'f', -1, 64) + " ms" }
