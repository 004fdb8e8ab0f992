package cli

import (
	"os"
	"testing"

	"github.com/redrive/redrive/dlq/dlqtest"
)

func TestMain(m *testing.M) { os.Exit(dlqtest.Main(m)) }
