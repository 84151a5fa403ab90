package state

// Root is the folder of every app's state documents in the state container.
const Root = "state/"

// Prefix is where an app's state documents live: state/{app}/.
func Prefix(app string) string { return Root + app + "/" }

// Blob is a poller's state document: state/{app}/{poller}.json.
func Blob(app, poller string) string { return Prefix(app) + poller + ".json" }
