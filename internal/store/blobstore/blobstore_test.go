package blobstore_test

import (
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/store"
	"github.com/pseudotrigger/pseudotrigger/internal/store/blobstore"
	"github.com/pseudotrigger/pseudotrigger/internal/store/storetest"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

func TestConformanceAzurite(t *testing.T) {
	cs := testenv.Azurite(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		// A fresh container per subtest: the first write creates it.
		s, err := blobstore.New(blobstore.Settings{Setting: testenv.AzuriteVar, ConnectionString: cs, Container: testenv.Name("conf-")}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
