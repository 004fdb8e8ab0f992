package demo

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// The demo tasks are example user code: an application's handlers own their
// tables and write them in the job's transaction, with their own SQL. So the
// SQL of the demo's tables lives here, beside the tasks that use them, and
// not in dlq, which holds the console's and the worker's queries only.

// Product is a row of demo_products, the table demo.apply_product_event
// writes to.
type Product struct {
	ID        string    `db:"id" json:"id"`
	Version   int64     `db:"version" json:"version"`
	Price     string    `db:"price" json:"price"` // numeric, kept as text so no cent is lost to float
	UpdatedAt time.Time `db:"updated_at" json:"updated_at"`
}

// applyProductVersionSQL writes a product version only if it is newer than
// the stored one. The guard sits in the upsert's WHERE clause, so two events
// for one product racing each other cannot let the older win: the row lock
// taken by ON CONFLICT serialises them and the loser's WHERE is false.
const applyProductVersionSQL = `
INSERT INTO demo_products (id, version, price, updated_at)
VALUES ($1, $2, $3::numeric, now())
ON CONFLICT (id) DO UPDATE SET version = EXCLUDED.version, price = EXCLUDED.price, updated_at = now()
WHERE demo_products.version < EXCLUDED.version`

// applyProductVersion stores version of product id at price (a decimal
// string) inside tx, unless the stored version is the same or newer. It
// reports whether the row changed; false means the event was stale.
func applyProductVersion(ctx context.Context, tx *sqlx.Tx, id string, version int64, price string) (bool, error) {
	res, err := tx.ExecContext(ctx, applyProductVersionSQL, id, version, price)
	if err != nil {
		return false, fmt.Errorf("apply product %s v%d: %w", id, version, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("apply product %s v%d: %w", id, version, err)
	}
	return n == 1, nil
}

// ReadProduct returns one demo product by id.
func ReadProduct(ctx context.Context, db *sqlx.DB, id string) (Product, error) {
	var p Product
	err := db.GetContext(ctx, &p, `SELECT id, version, price::text AS price, updated_at FROM demo_products WHERE id = $1`, id)
	if err != nil {
		return Product{}, fmt.Errorf("demo product %s: %w", id, err)
	}
	return p, nil
}
