package natsstore_test

import (
	"testing"

	"github.com/tenure-dev/tenure/internal/testserver"
	"github.com/tenure-dev/tenure/internal/testserver/natsserver"
)

func TestMain(m *testing.M) { testserver.Main(m, natsserver.Shared) }
