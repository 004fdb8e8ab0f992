package cli

import (
	"context"
	"fmt"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/audit"
)

func runAudit(ctx context.Context, args []string, e env) error {
	if len(args) == 0 || args[0] != "verify" {
		fmt.Fprintln(e.stderr, "Usage: redrive audit verify [flags]")
		return usagef("the audit command has one subcommand: verify")
	}
	fs := newFlagSet("audit verify", "Walk the audit trail in order, recomputing each entry's hash, and report\n"+
		"the first entry that was altered or whose predecessor is missing; print the\n"+
		"head it verified as head ID:HASH. A chain cannot prove where it ends: keep\n"+
		"copies of the head outside the database (the console logs it every few\n"+
		"minutes, /metrics has redrive_audit_head_id) and check the trail against\n"+
		"one with --expect-head, which fails when that entry is gone or differs.", e.stderr)
	register(fs, databaseOptions, []string{"expect-head"})
	f, err := parse(fs, args[1:], e.getenv)
	if err != nil {
		return err
	}
	expectHead := f.str("expect-head")
	var expect *dlq.AuditHead
	if expectHead != "" {
		h, err := dlq.ParseAuditHead(expectHead)
		if err != nil {
			fs.Usage()
			return usagef("--expect-head: %v", err)
		}
		expect = &h
	}
	db, err := openDB(ctx, f.str("database-url"))
	if err != nil {
		return err
	}
	defer db.Close()
	v, err := audit.New(db).VerifyAuditChain(ctx, expect)
	if err != nil {
		return err
	}
	if v.Problem != nil {
		return fmt.Errorf("audit trail broken after %d good entries: %s", v.Entries, v.Problem.Problem)
	}
	fmt.Fprintf(e.stdout, "audit trail intact: %d entries, every hash and link checks out\n", v.Entries)
	if expect != nil {
		fmt.Fprintf(e.stdout, "it holds the expected head %s\n", expect)
	}
	if v.Head.ID == 0 {
		fmt.Fprintln(e.stdout, "head none: the trail is empty")
	} else {
		fmt.Fprintf(e.stdout, "head %s\n", v.Head)
	}
	return nil
}
