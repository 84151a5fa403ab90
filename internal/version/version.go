// Package version says which build a binary is: the one answer of every binary's --version
// (handler, pollerctl, devhost), the handler's start-up log line and the handler version that
// state documents record.
package version

import (
	"runtime/debug"
	"strings"
)

// Set by scripts/build.sh with -ldflags -X when the build info lacks VCS data (a build outside a
// git checkout, or with -buildvcs=false): the revision, its commit time and "true" when the
// working tree had changes.
var (
	revision string
	time     string
	modified string
)

// String is the build's version: the module version ("(devel)" for a build from a checkout), the
// VCS revision (12 digits) and its commit time, and "dirty" when the tree had uncommitted
// changes, e.g. "(devel) rev 0123456789ab 2026-11-25T17:00:00Z dirty". The build info's VCS data
// wins over the -X values; without either it says "rev unknown".
func String() string {
	mod, rev, at, dirty := "(unknown)", revision, time, modified == "true"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			mod = bi.Main.Version
		}
		vcs := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev, vcs = s.Value, true
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if !vcs && revision != "" { // the build info had none: the -X values stand together
			rev, at, dirty = revision, time, modified == "true"
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	parts := []string{mod}
	if rev == "" {
		parts = append(parts, "rev unknown")
	} else {
		parts = append(parts, "rev "+rev)
	}
	if at != "" {
		parts = append(parts, at)
	}
	if dirty {
		parts = append(parts, "dirty")
	}
	return strings.Join(parts, " ")
}
