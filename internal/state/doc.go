// Package state holds the state document: the one JSON blob per poller that records both how far
// the poller has got (the checkpoint) and who may move it on (the lease).
//
// The document lives at state/{app}/{poller}.json in the state container (package blobpath).
// Decoding is strict: a blob that is not valid JSON, carries another version, names another
// poller or has fields this version does not know is refused with an error naming the blob, so
// that nothing ever writes over a document it does not fully understand.
package state
