package postgres

import (
	"context"
	"database/sql/driver"
	"errors"
	"strings"
	"sync/atomic"

	"github.com/lib/pq"
)

// Prepared, passed as a query's first argument, asks for the query to be
// prepared once on each connection and its plan kept: the hot reads of the
// console's pages, which otherwise spend more time being planned than
// being run (a letter by id: 0.5 ms to plan, 0.08 ms to run). It is not a
// parameter: $1 is the argument after it.
//
//	s.db.GetContext(ctx, &row, getDeadLetterSQL, postgres.Prepared, id)
//
// Only for statements whose best plan does not depend on their arguments
// (a lookup by key, a small table read whole): after five runs Postgres may
// keep one generic plan for every argument.
//
// Behind a transaction pooler the query runs unprepared, as every query
// does (see Open), since the statement prepared in one server session
// would be looked for in another.
const Prepared preparedMark = 0

// PreparedGeneric, passed as Prepared is, also runs the query with its
// generic plan from the first run on, and without JIT compilation: for a
// statement run many times a second whose plan is the same for every
// argument but whose custom plan costs more to make than to run, and
// which Postgres would never leave (the claim: a LIMIT given as a
// parameter makes the generic plan's estimate ten times the custom one's,
// so the server plans it anew on every call). JIT is off because a
// generic plan is costed for an unknown limit: on a large queue its
// estimate passes jit_above_cost, and compiling it took 80 ms a claim.
//
// The session is switched (plan_cache_mode = force_generic_plan, jit =
// off) before such a query and switched back before the next query that is
// not one, each a round trip only when the mode changes. Inside a
// transaction the session is not switched and the query runs as Prepared
// does: a SET there would be undone by a rollback.
const PreparedGeneric preparedMark = 1

// preparedMark is the type of Prepared and PreparedGeneric. Its Value
// refuses to be sent as a parameter: only a connection of Open takes it
// out of the arguments.
type preparedMark int

// Value implements driver.Valuer so that a handle not from Open fails the
// query rather than send Prepared as a parameter.
func (preparedMark) Value() (driver.Value, error) {
	return nil, errors.New("postgres.Prepared needs a database handle from postgres.Open")
}

// maxPrepared bounds the statements one connection keeps prepared. The
// statements marked Prepared are constants, far fewer than this; a query
// beyond it runs unprepared rather than grow the server's memory.
const maxPrepared = 64

// statementCache holds one connection's prepared statements by their text.
// A connection is used by one goroutine at a time (database/sql's
// guarantee), so it needs no lock.
type statementCache struct {
	// enabled is the connector's: false behind a transaction pooler.
	enabled *atomic.Bool
	stmts   map[string]driver.Stmt
	// inTx is set between BEGIN and COMMIT or ROLLBACK: a statement that
	// failed there has aborted the transaction, so it is not retried.
	inTx bool
	// generic says the session plans prepared statements generically and
	// without JIT, for the PreparedGeneric query that ran last.
	generic bool
}

// The session settings of a PreparedGeneric query, and their undoing.
const (
	enterGenericSQL = `SET plan_cache_mode = force_generic_plan; SET jit = off`
	leaveGenericSQL = `RESET plan_cache_mode; RESET jit`
)

// takePrepared removes Prepared or PreparedGeneric from the front of
// args and reports whether one was there, and which. The ordinals are
// renumbered to match.
func takePrepared(args []driver.NamedValue) (rest []driver.NamedValue, prepare, generic bool) {
	if len(args) == 0 {
		return args, false, false
	}
	mark, ok := args[0].Value.(preparedMark)
	if !ok {
		return args, false, false
	}
	rest = make([]driver.NamedValue, len(args)-1)
	for i, a := range args[1:] {
		a.Ordinal = i + 1
		rest[i] = a
	}
	return rest, true, mark == PreparedGeneric
}

// setMode switches the session into the settings of a PreparedGeneric
// query, or out of them, if it is not there already. Only outside a
// transaction: a query that wants generic plans inside one runs with the
// session as it is, and a session is never left switched when one begins
// (BeginTx). A switch that fails leaves the session's settings unknown,
// so the connection is given up (driver.ErrBadConn: database/sql retries
// the query on another, since nothing has run yet).
func (c *oneTripConn) setMode(ctx context.Context, generic bool) error {
	if c.cache.generic == generic || c.cache.inTx {
		return nil
	}
	query := leaveGenericSQL
	if generic {
		query = enterGenericSQL
	}
	if _, err := c.pqConn.ExecContext(ctx, query, nil); err != nil {
		return driver.ErrBadConn
	}
	c.cache.generic = generic
	return nil
}

// QueryContext runs a query, prepared on this connection when it asks for
// it with Prepared or PreparedGeneric (and statements are enabled),
// unprepared otherwise.
func (c *oneTripConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	args, prepare, err := c.marked(ctx, args)
	if err != nil {
		return nil, err
	}
	if !prepare {
		return c.pqConn.QueryContext(ctx, query, args)
	}
	var rows driver.Rows
	err = c.withStatement(ctx, query, func(st driver.Stmt) (err error) {
		rows, err = st.(driver.StmtQueryContext).QueryContext(ctx, args)
		return err
	})
	if errors.Is(err, errNoRoom) {
		return c.pqConn.QueryContext(ctx, query, args)
	}
	return rows, err
}

// ExecContext runs a statement, prepared as QueryContext does.
func (c *oneTripConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	args, prepare, err := c.marked(ctx, args)
	if err != nil {
		return nil, err
	}
	if !prepare {
		return c.pqConn.ExecContext(ctx, query, args)
	}
	var res driver.Result
	err = c.withStatement(ctx, query, func(st driver.Stmt) (err error) {
		res, err = st.(driver.StmtExecContext).ExecContext(ctx, args)
		return err
	})
	if errors.Is(err, errNoRoom) {
		return c.pqConn.ExecContext(ctx, query, args)
	}
	return res, err
}

// marked takes a Prepared or PreparedGeneric mark off args, and reports
// whether the query is to be prepared here, with the session switched
// into or out of the generic mode as the query asks (setMode).
func (c *oneTripConn) marked(ctx context.Context, args []driver.NamedValue) ([]driver.NamedValue, bool, error) {
	args, prepare, generic := takePrepared(args)
	prepare = prepare && c.cache.enabled.Load()
	return args, prepare, c.setMode(ctx, prepare && generic)
}

// errNoRoom says the cache is full and the query is to run unprepared.
var errNoRoom = errors.New("no room for another prepared statement")

// withStatement runs fn with query's statement, preparing it on first use.
// A statement the server no longer has (DISCARD ALL or DEALLOCATE ran in
// this session) or whose result type has changed since it was prepared
// (a migration altered a table or view it reads) is forgotten, and, outside
// a transaction, prepared again and run once more: it is a read or a
// statement that failed before doing anything.
func (c *oneTripConn) withStatement(ctx context.Context, query string, fn func(driver.Stmt) error) error {
	st, err := c.statement(ctx, query)
	if err != nil {
		return err
	}
	err = fn(st)
	if !stalePrepared(err) {
		return err
	}
	c.forget(query, st)
	if c.cache.inTx {
		return err
	}
	if st, err = c.statement(ctx, query); err != nil {
		return err
	}
	return fn(st)
}

// statement returns query's prepared statement, preparing it if needed.
func (c *oneTripConn) statement(ctx context.Context, query string) (driver.Stmt, error) {
	if st, ok := c.cache.stmts[query]; ok {
		return st, nil
	}
	if len(c.cache.stmts) >= maxPrepared {
		return nil, errNoRoom
	}
	st, err := c.pqConn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	if c.cache.stmts == nil {
		c.cache.stmts = map[string]driver.Stmt{}
	}
	c.cache.stmts[query] = st
	return st, nil
}

// forget drops a stale statement. One whose plan changed still exists in
// the session and is closed; in a failed transaction the server would not
// take the Close, and the statement stays until the connection ends.
func (c *oneTripConn) forget(query string, st driver.Stmt) {
	delete(c.cache.stmts, query)
	if !c.cache.inTx {
		_ = st.Close()
	}
}

// stalePrepared reports whether err says a prepared statement can no
// longer run as prepared: 26000 (invalid_sql_statement_name), "prepared
// statement "3" does not exist", or 0A000 (feature_not_supported),
// "cached plan must not change result type".
func stalePrepared(err error) bool {
	var pqErr *pq.Error
	if !errors.As(err, &pqErr) {
		return false
	}
	switch pqErr.Code {
	case "26000":
		return true
	case "0A000":
		return strings.Contains(pqErr.Message, "cached plan must not change result type")
	}
	return false
}

// BeginTx begins a transaction and notes it, for withStatement, with the
// session's settings back to its own first.
func (c *oneTripConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if err := c.setMode(ctx, false); err != nil {
		return nil, err
	}
	tx, err := c.pqConn.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	c.cache.inTx = true
	return &noteEndTx{Tx: tx, cache: &c.cache}, nil
}

// noteEndTx is a transaction that clears inTx when it ends.
type noteEndTx struct {
	driver.Tx
	cache *statementCache
}

func (t *noteEndTx) Commit() error {
	t.cache.inTx = false
	return t.Tx.Commit()
}

func (t *noteEndTx) Rollback() error {
	t.cache.inTx = false
	return t.Tx.Rollback()
}
