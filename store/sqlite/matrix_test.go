package sqlite_test

import (
	"testing"

	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/storetest"
)

func TestMatrixStore(t *testing.T) { storetest.RunMatrix(t, openTemp) }

var _ store.Matrix = store.Store(nil)
