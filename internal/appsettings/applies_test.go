package appsettings

import (
	"context"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// TestAppliesTo: a setting that does not apply to a cursor kind (what pollerctl new leaves out of
// the settings it prints for such a poller) is refused for it, naming the setting; one that
// applies is accepted.
func TestAppliesTo(t *testing.T) {
	values := map[string]string{"SETTLE_LAG": "3s", "CDC_SLOT": "myslot", "CDC_PUBLICATION": "mypub", "CDC_MAX_RETAINED": "2GiB"}
	for _, kind := range state.Kinds {
		opts := []poller.Option{poller.WithColumns("id", "c"), poller.WithKey("id")}
		if !state.ChangeKind(kind) { // a cursor column besides the key: timestamp+pk's needs a tiebreaker
			opts = append(opts, poller.WithCursorColumn("c"))
		}
		def := pollerdef.Of(poller.New("p", "t", poller.CursorKind(kind), func(context.Context, *poller.Batch[poller.Row]) error { return nil }, opts...))
		for _, st := range Table {
			v, ok := values[st.Suffix]
			if !ok {
				if _, limited := onlyFor[st.Suffix]; limited {
					t.Errorf("%s applies to some kinds only: give it a value here", st.Suffix)
				}
				continue
			}
			env := map[string]string{"P_DB_DRIVER": "postgres", "P_DB_CONNECTION": "postgres://x/y", "P_" + st.Suffix: v}
			_, err := Load(def, func(k string) string { return env[k] })
			refused := err != nil && strings.Contains(err.Error(), "P_"+st.Suffix+":")
			if refused == st.AppliesTo(kind) {
				t.Errorf("%s=%s on a %s poller: AppliesTo %v, but Load says %v", st.Suffix, v, kind, st.AppliesTo(kind), err)
			}
		}
	}
}
