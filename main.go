// Command redrive is the dead-letter operations console, its worker and the
// tools around them, in one binary; `redrive help` lists the commands.
// Everything but wiring the process lives in cli.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/redrive/redrive/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
