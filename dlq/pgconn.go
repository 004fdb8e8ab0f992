package dlq

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"

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
type oneTripConnector struct {
	pq *pq.Connector
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
	return &oneTripConn{pqConn: pc}, nil
}

// Driver implements driver.Connector.
func (c *oneTripConnector) Driver() driver.Driver { return c.pq.Driver() }

// pqConn is what database/sql uses of a lib/pq connection; oneTripConn
// passes it all through and changes only how parameters are converted.
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
}

// bytea marks a parameter bound for a bytea column: it goes out in binary
// format, unchanged. Every other []byte goes out as text.
type bytea []byte

// CheckNamedValue converts a parameter as database/sql and lib/pq would,
// then turns a resulting []byte into a string unless it was a bytea.
func (c *oneTripConn) CheckNamedValue(nv *driver.NamedValue) error {
	if b, ok := nv.Value.(bytea); ok {
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
