package postgres

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/lib/pq"
)

// oneTripConnector opens lib/pq connections that send every query in one
// round trip, so that Redrive works behind a transaction pooler.
//
// By default lib/pq runs a query with parameters in two round trips (Parse
// and Describe, then Bind and Execute). Between them the server connection
// is idle, and a transaction pooler such as PgBouncer may hand the second
// half to another server connection: "bind message supplies 2 parameters,
// but prepared statement "" requires 4", "unnamed prepared statement does
// not exist". binary_parameters=yes sends the four messages at once.
//
// Its catch: it sends []byte parameters in binary format, which suits bytea
// but not jsonb, whose binary format starts with a version byte ("pq:
// unsupported jsonb version number 123"), and Redrive passes JSON as []byte
// (json.RawMessage, json.Marshal) everywhere. So oneTripConn sends []byte
// as text, as lib/pq's default mode does for every type but bytea, and a
// bytea parameter says so by being a bytea.
//
// Its connections also keep the statements marked Prepared prepared
// (prepared.go), while prepare is set: Open sets it on a direct
// connection, not behind a transaction pooler.
type oneTripConnector struct {
	pq      *pq.Connector
	prepare atomic.Bool
}

func newOneTripConnector(dsn string) (*oneTripConnector, error) {
	cfg, err := pq.NewConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	cfg.BinaryParameters = true
	c, err := pq.NewConnectorConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	return &oneTripConnector{pq: c}, nil
}

// Connect implements driver.Connector.
func (c *oneTripConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.pq.Connect(ctx)
	if err != nil {
		return nil, err
	}
	pc, ok := conn.(pqConn)
	if !ok {
		conn.Close()
		return nil, fmt.Errorf("open database: lib/pq connection %T lacks a method Redrive relies on", conn)
	}
	return &oneTripConn{pqConn: pc, cache: statementCache{enabled: &c.prepare}}, nil
}

// Driver implements driver.Connector.
func (c *oneTripConnector) Driver() driver.Driver { return c.pq.Driver() }

// pqConn is what database/sql uses of a lib/pq connection; oneTripConn
// passes it all through and changes only how parameters are converted and
// which statements it keeps prepared (prepared.go).
type pqConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
	driver.NamedValueChecker
}

type oneTripConn struct {
	pqConn
	cache statementCache
}

// Bytea marks a parameter bound for a bytea column: it goes out in binary
// format, unchanged. Every other []byte goes out as text.
type Bytea []byte

// CheckNamedValue converts a parameter as database/sql and lib/pq would,
// then turns a resulting []byte into a string unless it was a bytea. A
// copyChunk passes as it is, for copyInStmt, and so does Prepared, which
// QueryContext and ExecContext take out (prepared.go).
func (c *oneTripConn) CheckNamedValue(nv *driver.NamedValue) error {
	switch nv.Value.(type) {
	case copyChunk, preparedMark:
		return nil
	}
	if b, ok := nv.Value.(Bytea); ok {
		if b == nil {
			nv.Value = nil
		} else {
			nv.Value = []byte(b)
		}
		return nil
	}
	err := c.pqConn.CheckNamedValue(nv)
	if errors.Is(err, driver.ErrSkip) {
		// What database/sql does on ErrSkip: call a Valuer, turn named
		// types into their base type.
		nv.Value, err = driver.DefaultParameterConverter.ConvertValue(nv.Value)
	}
	if err != nil {
		return err
	}
	if b, ok := nv.Value.([]byte); ok && b != nil {
		nv.Value = string(b)
	}
	return nil
}

// copyChunk is rows already in COPY's text format, each ending in a
// newline but the last (copyRows builds them). Passed as the only argument
// of a COPY statement's Exec, it is sent as it is, instead of being read
// as one row's values and encoded by lib/pq.
type copyChunk []byte

// copyDataStmt is lib/pq's statement for `COPY ... FROM STDIN`: besides
// taking one row's values per Exec, it sends raw rows with CopyData.
type copyDataStmt interface {
	driver.Stmt
	CopyData(ctx context.Context, rows string) (driver.Result, error)
}

// PrepareContext prepares query on the lib/pq connection, with the
// session's settings back to its own (prepared.go, setMode), and lets a
// COPY statement take a copyChunk (copyInStmt).
func (c *oneTripConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if err := c.setMode(ctx, false); err != nil {
		return nil, err
	}
	stmt, err := c.pqConn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	if copyIn, ok := stmt.(copyDataStmt); ok {
		return copyInStmt{copyIn}, nil
	}
	return stmt, nil
}

// copyInStmt is lib/pq's COPY statement, which also takes a copyChunk as
// its only argument and hands it to CopyData. database/sql offers no other
// way to reach CopyData inside a transaction.
type copyInStmt struct {
	copyDataStmt
}

// ExecContext sends a copyChunk with CopyData, and gives anything else
// (one row's values, or none to end the COPY) to lib/pq's Exec.
func (s copyInStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	if len(args) == 1 {
		if chunk, ok := args[0].Value.(copyChunk); ok {
			// CopyData copies the string into its own buffer before it
			// returns and keeps nothing, so the chunk is lent to it as a
			// string rather than copied into one (a seed's 3 GB, copied
			// once instead of twice).
			return s.CopyData(ctx, unsafe.String(unsafe.SliceData(chunk), len(chunk)))
		}
	}
	values := make([]driver.Value, len(args))
	for i, arg := range args {
		values[i] = arg.Value
	}
	// lib/pq's COPY statement has only the context-free Exec.
	return s.Exec(values)
}

// Value refuses the chunk: only a COPY statement on a connection of Open
// sends one as it is, and anywhere else it would be written as one value.
func (copyChunk) Value() (driver.Value, error) {
	return nil, errors.New("dlq: COPY rows need a database handle from dlq.Open")
}
