package demo

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/audit"
)

// The demo incident: a dependency of the shop goes down, the tasks that
// call it dead-letter, someone deploys the fix, and a replay of the group
// succeeds. The dependency's state is a row of demo_dependencies
// (schema.sql) that the tasks read on every attempt.

// PaymentsProvider is the dependency the demo incident takes down: the card
// processor behind payments.charge and payments.refund.
const PaymentsProvider = "payments-provider"

// Outage is a dependency's scheduled outage: down from From until Until.
type Outage struct {
	Dependency string    `db:"name"`
	From       time.Time `db:"down_from"`
	Until      time.Time `db:"down_until"`
	// Now is the database's clock when the outage was read: tasks compare
	// against the same clock.
	Now time.Time `db:"now"`
}

// Down reports whether the dependency was down when the outage was read.
func (o Outage) Down() bool { return !o.Now.Before(o.From) && o.Now.Before(o.Until) }

// Outages reads and changes the demo's simulated dependencies. Its store
// writes the audit entry of "deploy the fix".
type Outages struct {
	db    *sqlx.DB
	store *audit.Store
}

// NewOutages returns the outages of the demo tables in db; store audits
// their changes.
func NewOutages(db *sqlx.DB, store *audit.Store) *Outages {
	return &Outages{db: db, store: store}
}

// scheduleOutageSQL replaces the dependency's outage with a new window.
const scheduleOutageSQL = `
INSERT INTO demo_dependencies (name, down_from, down_until) VALUES ($1, $2, $3)
ON CONFLICT (name) DO UPDATE SET down_from = EXCLUDED.down_from, down_until = EXCLUDED.down_until`

// Schedule takes dependency down from from until until (the timer: it
// recovers by itself then, unless the fix is deployed sooner).
func (o *Outages) Schedule(ctx context.Context, dependency string, from, until time.Time) error {
	if until.Before(from) {
		return &dlq.ValidationError{Fields: map[string]string{"until": "must not be before from"}}
	}
	if _, err := o.db.ExecContext(ctx, scheduleOutageSQL, dependency, from, until); err != nil {
		return fmt.Errorf("schedule outage of %s: %w", dependency, err)
	}
	return nil
}

const readOutageSQL = `SELECT name, down_from, down_until, now() AS now FROM demo_dependencies WHERE name = $1`

// Read returns dependency's outage; ok is false when none was ever
// scheduled (the dependency is up).
func (o *Outages) Read(ctx context.Context, dependency string) (Outage, bool, error) {
	return readOutage(ctx, o.db, dependency)
}

func readOutage(ctx context.Context, q sqlx.QueryerContext, dependency string) (Outage, bool, error) {
	var out Outage
	err := sqlx.GetContext(ctx, q, &out, readOutageSQL, dependency)
	if errors.Is(err, sql.ErrNoRows) {
		return Outage{}, false, nil
	}
	if err != nil {
		return Outage{}, false, fmt.Errorf("read outage of %s: %w", dependency, err)
	}
	return out, true, nil
}

// endOutageSQL ends an outage that is under way or still to come: its end
// moves to now (and its start too, if it had not started). The guard in the
// WHERE clause makes a second click find nothing to end.
const endOutageSQL = `
UPDATE demo_dependencies SET down_until = now(), down_from = least(down_from, now())
WHERE name = $1 AND down_until > now()`

// DeployFix ends dependency's outage now and audits it as a demo action by
// a. It is a conflict when the dependency is not down and no outage is to
// come: there is nothing to fix.
func (o *Outages) DeployFix(ctx context.Context, dependency string, a dlq.Actor, now time.Time) error {
	what := "Deployed the fix of the demo incident: " + dependency + " is back up"
	details := map[string]string{"demo": "deploy_fix", "dependency": dependency}
	return o.store.AuditDemoAction(ctx, a, now, what, details, func(ctx context.Context, tx *sqlx.Tx) error {
		res, err := tx.ExecContext(ctx, endOutageSQL, dependency)
		if err != nil {
			return fmt.Errorf("end outage of %s: %w", dependency, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("end outage of %s: %w", dependency, err)
		} else if n == 0 {
			return &dlq.Error{Code: "conflict", Message: "The " + dependency + " is not down: there is no fix to deploy."}
		}
		return nil
	})
}

// dependencyDown reports whether dependency is down now, by the database's
// clock: the check a task makes before it calls the dependency.
func dependencyDown(ctx context.Context, q sqlx.QueryerContext, dependency string) (bool, error) {
	o, ok, err := readOutage(ctx, q, dependency)
	return ok && o.Down(), err
}
