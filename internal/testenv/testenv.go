// Package testenv finds the servers that tests run against. scripts/test.sh starts them and
// exports their addresses; a test whose server is not configured skips with a message naming
// the variable to set, except under CI=true, where every server the machine can have must be
// there and a missing one fails the test.
package testenv

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
)

// AzuriteVar names the connection string of the Azurite that scripts/test.sh starts.
const AzuriteVar = "AZURITE_CONNECTION_STRING"

// Azurite returns the Azurite connection string, or skips (fails under CI=true).
func Azurite(t testing.TB) string {
	t.Helper()
	cs := os.Getenv(AzuriteVar)
	if cs == "" {
		missing(t, AzuriteVar, "an Azurite connection string (scripts/test.sh starts Azurite and sets it)")
	}
	return cs
}

// InCI reports whether CI=true.
func InCI() bool { return strings.EqualFold(os.Getenv("CI"), "true") }

func missing(t testing.TB, variable, what string) {
	t.Helper()
	if InCI() {
		t.Fatalf("%s is not set: CI must run this test against the real server; set it to %s", variable, what)
	}
	t.Skipf("set %s to %s to run this test", variable, what)
}

// Name returns a fresh lower-case name with prefix, for containers and blobs.
func Name(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}
