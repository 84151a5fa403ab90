// Package liveness keeps each poller's liveness mark: a small blob, liveness/{app}/{poller}.json
// in the state container, that says when the poller's timer last ran a tick and how that tick
// ended, including the ticks that write nothing to the state document (idle ticks, and ticks
// that fail before they take the lease). Ticks never read it; the status does.
package liveness

// Blob is the name of a poller's liveness mark.
func Blob(app, pollerName string) string { return Prefix(app) + pollerName + ".json" }

// Prefix is where an app's liveness marks live.
func Prefix(app string) string { return "liveness/" + app + "/" }
