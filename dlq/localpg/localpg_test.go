package localpg_test

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/redrive/redrive/dlq/localpg"
)

func TestStartRefusesAPortInUse(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	_, err = localpg.Start(context.Background(), localpg.Config{Dir: t.TempDir(), Port: port})
	if err == nil || !strings.Contains(err.Error(), "already in use") {
		t.Fatalf("want a port-in-use error, got %v", err)
	}
}

func TestStartAndStop(t *testing.T) {
	t.Parallel()
	// Not t.TempDir: as root, postgres runs as another user, who must be
	// able to reach the folder; MkdirTemp makes one level under /tmp.
	dir, err := os.MkdirTemp("", "localpg-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	c, err := localpg.Start(context.Background(), localpg.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	// The data folder is reused: a second start finds the cluster initialised.
	c, err = localpg.Start(context.Background(), localpg.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
}
