package cli

import (
	"os"
	"testing"

	"github.com/redrive/redrive/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }
