// Package blobpath names every blob the product keeps in its state container (db-state): each
// poller's state document, the tombstone a deleted one leaves, the backups pollerctl takes before
// a change, dead letters and liveness marks. Every reader and writer takes the names from here,
// so that a layout is written once.
//
//	state/{app}/{poller}.json                   the state document (checkpoint and lease)
//	tombstones/{app}/{poller}.json              a deleted state document's last fencing token
//	backups/{app}/{poller}/{what}{utc}.json     a document as it was before pollerctl changed it
//	deadletter/{app}/{poller}/{batch id}.json   a batch set aside after its attempts
//	liveness/{app}/{poller}.json                when the poller last ticked (alerts read it)
package blobpath

import (
	"strings"
	"time"
)

// StateRoot is the folder of every app's state documents.
const StateRoot = "state/"

// StatePrefix is where an app's state documents live: state/{app}/.
func StatePrefix(app string) string { return StateRoot + app + "/" }

// State is a poller's state document: state/{app}/{poller}.json.
func State(app, poller string) string { return StatePrefix(app) + poller + ".json" }

// TombstoneRoot is the folder of the tombstones that deleted state documents leave behind.
const TombstoneRoot = "tombstones/"

// TombstoneOf is where the tombstone of the state document stateBlob (state/{app}/{poller}.json)
// lives: tombstones/{app}/{poller}.json.
func TombstoneOf(stateBlob string) string {
	return TombstoneRoot + strings.TrimPrefix(stateBlob, StateRoot)
}

// Backups is where a poller's backups are: backups/{app}/{poller}/.
func Backups(app, poller string) string { return "backups/" + app + "/" + poller + "/" }

// BackupStamp is the layout of the UTC time in a backup's name, which sorts as the times do.
const BackupStamp = "20060102T150405.000000000Z"

// Backup is the backup taken at t, what naming its kind ("" for a state document):
// backups/{app}/{poller}/{what}{utc}.json.
func Backup(app, poller, what string, t time.Time) string {
	return Backups(app, poller) + what + t.UTC().Format(BackupStamp) + ".json"
}

// DeadLetters is where a poller's dead letters are: deadletter/{app}/{poller}/.
func DeadLetters(app, poller string) string { return "deadletter/" + app + "/" + poller + "/" }

// DeadLetter is the dead letter of a batch: deadletter/{app}/{poller}/{batch id}.json.
func DeadLetter(app, poller, batchID string) string {
	return DeadLetters(app, poller) + batchID + ".json"
}

// LivenessPrefix is where an app's liveness marks are: liveness/{app}/.
func LivenessPrefix(app string) string { return "liveness/" + app + "/" }

// Liveness is a poller's liveness mark: liveness/{app}/{poller}.json.
func Liveness(app, poller string) string { return LivenessPrefix(app) + poller + ".json" }
