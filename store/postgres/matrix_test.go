package postgres_test

import (
	"testing"

	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/storetest"
)

func TestMatrixStore(t *testing.T) {
	storetest.RunMatrix(t, func(t *testing.T) store.Store { return openFresh(t) })
}
