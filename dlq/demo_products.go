package dlq

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// DemoProduct is a row of demo_products, the table the demo task
// demo.apply_product_event writes to.
type DemoProduct struct {
	ID        string    `db:"id" json:"id"`
	Version   int64     `db:"version" json:"version"`
	Price     string    `db:"price" json:"price"` // numeric, kept as text so no cent is lost to float
	UpdatedAt time.Time `db:"updated_at" json:"updated_at"`
}

// applyDemoProductSQL writes a product version only if it is newer than the
// stored one. The guard sits in the upsert's WHERE clause, so two events for
// one product racing each other cannot let the older win: the row lock taken
// by ON CONFLICT serialises them and the loser's WHERE is false.
const applyDemoProductSQL = `
INSERT INTO demo_products (id, version, price, updated_at)
VALUES ($1, $2, $3::numeric, now())
ON CONFLICT (id) DO UPDATE SET version = EXCLUDED.version, price = EXCLUDED.price, updated_at = now()
WHERE demo_products.version < EXCLUDED.version`

// ApplyDemoProduct stores version of product id at price (a decimal string)
// inside tx, unless the stored version is the same or newer. It reports
// whether the row changed; false means the event was stale.
func ApplyDemoProduct(ctx context.Context, tx *sqlx.Tx, id string, version int64, price string) (bool, error) {
	res, err := tx.ExecContext(ctx, applyDemoProductSQL, id, version, price)
	if err != nil {
		return false, fmt.Errorf("apply product %s v%d: %w", id, version, translate(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("apply product %s v%d: %w", id, version, err)
	}
	return n == 1, nil
}

// DemoProduct returns one demo product by id.
func (s *Store) DemoProduct(ctx context.Context, id string) (DemoProduct, error) {
	var p DemoProduct
	err := s.db.GetContext(ctx, &p, `SELECT id, version, price::text AS price, updated_at FROM demo_products WHERE id = $1`, id)
	if err != nil {
		return DemoProduct{}, fmt.Errorf("demo product %s: %w", id, translate(err))
	}
	return p, nil
}
