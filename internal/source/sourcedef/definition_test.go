package sourcedef

import (
	"strings"
	"testing"
	"time"
)

func TestIdentifiers(t *testing.T) {
	ok := []string{"orders", "Order Details", `Customer "Name"`, "[weird]", "it's", "MixedCase", "dbo$x#1", "ünïcode"}
	bad := []string{"", " lead", "trail ", "orders; DROP TABLE x", "a--b", "a/*b", "tab\tname", "nul\x00", "semi;", "new\nline", strings.Repeat("x", 129)}
	for _, s := range ok {
		if err := checkIdent(s); err != nil {
			t.Errorf("%q refused: %v", s, err)
		}
	}
	for _, s := range bad {
		if err := checkIdent(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
}

func TestSettleLag(t *testing.T) {
	if (Definition{}).SettleLagOrDefault() != DefaultSettleLag || (Definition{SettleLag: NoSettleLag}).SettleLagOrDefault() != 0 ||
		(Definition{SettleLag: 3 * time.Second}).SettleLagOrDefault() != 3*time.Second {
		t.Fatal("settle lag defaults")
	}
	if DefaultSettleLag <= 0 {
		t.Fatal("the default settle lag must not be zero")
	}
}
