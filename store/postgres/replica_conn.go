package postgres

import (
	"context"
	"database/sql/driver"
	"fmt"
	"sync/atomic"
)

// routedConnector opens the read store's connections to the replica while
// toReplica is set, to the primary otherwise. Each connection remembers
// where it goes, and database/sql drops it from the pool (IsValid, and
// ResetSession when it is taken out again) once reads have moved, so the
// pool follows the choice within a query.
type routedConnector struct {
	replica, primary *oneTripConnector
	toReplica        *atomic.Bool
}

// Connect implements driver.Connector. A replica that refuses the
// connection sends the read to the primary at once rather than failing it:
// the next measure then moves every read.
func (c *routedConnector) Connect(ctx context.Context) (driver.Conn, error) {
	toReplica := c.toReplica.Load()
	if toReplica {
		conn, err := c.replica.Connect(ctx)
		if err == nil {
			return routed(conn, true, c.toReplica)
		}
		if ctx.Err() != nil {
			return nil, err
		}
	}
	conn, err := c.primary.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return routed(conn, false, c.toReplica)
}

// Driver implements driver.Connector.
func (c *routedConnector) Driver() driver.Driver { return c.primary.Driver() }

func routed(conn driver.Conn, toReplica bool, route *atomic.Bool) (driver.Conn, error) {
	pc, ok := conn.(pqConn)
	if !ok {
		conn.Close()
		return nil, fmt.Errorf("open read connection: %T lacks a method Redrive relies on", conn)
	}
	return &routedConn{pqConn: pc, toReplica: toReplica, route: route}, nil
}

// routedConn is a read connection that knows which database it goes to.
type routedConn struct {
	pqConn
	toReplica bool
	route     *atomic.Bool
}

func (c *routedConn) current() bool { return c.toReplica == c.route.Load() }

// IsValid implements driver.Validator: database/sql asks it when the
// connection goes back to the pool.
func (c *routedConn) IsValid() bool { return c.current() && c.pqConn.IsValid() }

// ResetSession implements driver.SessionResetter: database/sql calls it
// before reusing a pooled connection, and opens another on ErrBadConn.
func (c *routedConn) ResetSession(ctx context.Context) error {
	if !c.current() {
		return driver.ErrBadConn
	}
	return c.pqConn.ResetSession(ctx)
}
