package demo

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/redrive/redrive/dlq"
)

// mix draws demo jobs with realistic payloads: order ids, customers,
// amounts, idempotency keys. It is not safe for concurrent use; a Producer
// uses it from one goroutine.
type mix struct {
	rng   *rand.Rand
	kinds []kind
	total int
	// seq makes idempotency keys unique across a run.
	seq int
	// versions is the latest version produced per demo product.
	versions map[string]int64
	// recentEvents and recentKeys feed the occasional duplicate, as a
	// real upstream redelivers.
	recentEvents []map[string]any
	recentKeys   []dlq.EnqueueParams

	firstNames, lastNames, domains, currencies, templates, carriers []string
}

func newMix(seed uint64) *mix {
	m := &mix{
		rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), kinds: kinds(), versions: map[string]int64{},
		firstNames: strings.Fields(firstNames), lastNames: strings.Fields(lastNames), domains: strings.Fields(domains),
		currencies: strings.Fields(currencies), templates: strings.Fields(templates), carriers: strings.Fields(carriers),
	}
	for _, k := range m.kinds {
		m.total += k.weight
	}
	return m
}

// next draws the next job. Now and then it repeats a recent job with the
// same idempotency key, which the store turns into a no-op.
func (m *mix) next() dlq.EnqueueParams {
	m.seq++
	if len(m.recentKeys) > 0 && m.rng.IntN(100) < 2 {
		return m.recentKeys[m.rng.IntN(len(m.recentKeys))]
	}
	n := m.rng.IntN(m.total)
	for _, k := range m.kinds {
		if n < k.weight {
			p := k.build(m)
			m.recentKeys = remember(m.recentKeys, p, 20)
			return p
		}
		n -= k.weight
	}
	panic("unreachable: weights sum to total")
}

func remember[T any](ring []T, v T, size int) []T {
	ring = append(ring, v)
	if len(ring) > size {
		ring = ring[1:]
	}
	return ring
}

// The vocabulary of the payloads, as constants so the package holds no
// mutable state; newMix splits them into the mix's word lists.
const (
	firstNames = "maria liam sofia noah amara kenji lucia omar freya mateo priya jonas"
	lastNames  = "lopez smith rossi tanaka okafor muller novak silva haddad berg"
	domains    = "example.com mail.example.org shop.example.net example.co.uk"
	currencies = "EUR USD GBP"
	templates  = "order_confirmation shipping_update password_reset receipt abandoned_cart"
	carriers   = "dhl ups postnl"
)

const idAlphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"

func (m *mix) pick(xs []string) string { return xs[m.rng.IntN(len(xs))] }

func (m *mix) id(prefix string, n int) string {
	var b strings.Builder
	b.WriteString(prefix)
	for range n {
		b.WriteByte(idAlphabet[m.rng.IntN(len(idAlphabet))])
	}
	return b.String()
}

func (m *mix) orderID() string { return m.id("ord_", 8) }

func (m *mix) email() string {
	return fmt.Sprintf("%s.%s@%s", m.pick(m.firstNames), m.pick(m.lastNames), m.pick(m.domains))
}

// amount is a price with cents, as a JSON number that keeps them exact.
func (m *mix) amount(lo, hi int) json.Number {
	cents := lo*100 + m.rng.IntN((hi-lo)*100)
	return json.Number(fmt.Sprintf("%d.%02d", cents/100, cents%100))
}

func (m *mix) key(parts ...any) string {
	return fmt.Sprint(parts...) + fmt.Sprintf(":%d", m.seq)
}

func params(task, queue string, maxAttempts int, key string, kwargs map[string]any) dlq.EnqueueParams {
	b, err := json.Marshal(kwargs)
	if err != nil {
		panic(err) // maps of strings and numbers always marshal
	}
	return dlq.EnqueueParams{Task: task, Queue: queue, MaxAttempts: maxAttempts, IdempotencyKey: key, Kwargs: b}
}

func (m *mix) payment(extra map[string]any) (string, map[string]any) {
	order := m.orderID()
	kw := map[string]any{"order_id": order, "amount": m.amount(5, 480), "currency": m.pick(m.currencies), "email": m.email()}
	for k, v := range extra {
		kw[k] = v
	}
	return order, kw
}

func (m *mix) reindexOrder() dlq.EnqueueParams {
	order := m.orderID()
	return params(TaskNoop, "default", 3, m.key("search-reindex:", order),
		map[string]any{"order_id": order, "index": "orders_v3", "reason": "order.updated"})
}

func (m *mix) sendEmail() dlq.EnqueueParams {
	order, tmpl := m.orderID(), m.pick(m.templates)
	return params(TaskSleep, "emails", 4, m.key("email:", tmpl, ":", order), map[string]any{
		"seconds": float64(m.rng.IntN(40)+5) / 100, "to": m.email(), "template": tmpl, "order_id": order,
	})
}

func (m *mix) settlePayment() dlq.EnqueueParams {
	order, kw := m.payment(map[string]any{"seconds": float64(m.rng.IntN(90)+10) / 100})
	return params(TaskSleep, "payments", 4, m.key("settle:", order), kw)
}

func (m *mix) capturePaymentFlaky() dlq.EnqueueParams {
	order, kw := m.payment(map[string]any{"fail_times": 1 + m.rng.IntN(2)})
	return params(TaskFlaky, "payments", 4, m.key("capture:", order), kw)
}

func (m *mix) capturePaymentFlakier() dlq.EnqueueParams {
	order, kw := m.payment(map[string]any{"fail_times": 5})
	return params(TaskFlaky, "payments", 3, m.key("capture:", order), kw)
}

func (m *mix) chargeDeclined() dlq.EnqueueParams {
	order, kw := m.payment(map[string]any{"kind": "payment"})
	return params(TaskPermanent, "payments", 4, m.key("charge:", order), kw)
}

func (m *mix) invalidEmail() dlq.EnqueueParams {
	order, kw := m.payment(map[string]any{"kind": "validation"})
	kw["email"] = strings.SplitN(kw["email"].(string), "@", 2)[0] + "@" // the typo the validation rejects
	return params(TaskPermanent, "emails", 4, m.key("welcome:", order), kw)
}

func (m *mix) reserveStockOutage() dlq.EnqueueParams {
	order := m.orderID()
	sku := fmt.Sprintf("SKU-%04d", 1000+m.rng.IntN(60))
	return params(TaskAlwaysFail, "default", 3, m.key("reserve:", order),
		map[string]any{"order_id": order, "sku": sku, "quantity": 1 + m.rng.IntN(3)})
}

func (m *mix) allocateShipment() dlq.EnqueueParams {
	order := m.orderID()
	return params(TaskPanic, "default", 3, m.key("allocate:", order),
		map[string]any{"order_id": order, "warehouse": m.rng.IntN(3), "carrier": m.pick(m.carriers)})
}

// productEvent emits price changes for a dozen products. Most carry the next
// version; some arrive late with an older one (the guard ignores them) and
// some are redeliveries of an earlier event under a new idempotency key
// (ProcessOnce ignores them).
func (m *mix) productEvent() dlq.EnqueueParams {
	if len(m.recentEvents) > 0 && m.rng.IntN(100) < 5 {
		ev := m.recentEvents[m.rng.IntN(len(m.recentEvents))]
		return params(TaskApplyProductEvent, "default", 4, m.key("product-event-redelivery:", ev["event_id"]), ev)
	}
	product := fmt.Sprintf("P-%d", 1001+m.rng.IntN(12))
	m.versions[product]++
	version := m.versions[product]
	if version > 2 && m.rng.IntN(100) < 10 {
		version -= int64(1 + m.rng.IntN(2)) // a late, out-of-order event
	}
	ev := map[string]any{"event_id": m.id("evt_", 12), "product_id": product, "version": version, "price": m.amount(3, 250)}
	m.recentEvents = remember(m.recentEvents, ev, 20)
	return params(TaskApplyProductEvent, "default", 4, m.key("product-event:", ev["event_id"]), ev)
}

// shopOrder is an order number as the shop's tasks carry it ("ORD-88123").
func (m *mix) shopOrder() string { return fmt.Sprintf("ORD-%d", 10000+m.rng.IntN(990000)) }

// chargeOrder charges an order through the payments provider, with the
// payload the shop's seeded letters have: it succeeds, except while the
// demo incident has the provider down.
func (m *mix) chargeOrder() dlq.EnqueueParams {
	order := m.shopOrder()
	p := params(TaskCharge, "payments", 3, m.key("charge-", order), map[string]any{
		"amount": m.amount(5, 480), "currency": m.pick(m.currencies), "customer": m.id("cus_", 14),
		"card_last4": fmt.Sprintf("%04d", m.rng.IntN(10000)), "capture": true,
	})
	p.Args = json.RawMessage(fmt.Sprintf("[%q]", order))
	return p
}

// refundOrder refunds part of an order through the payments provider.
func (m *mix) refundOrder() dlq.EnqueueParams {
	order := m.shopOrder()
	p := params(TaskRefund, "payments", 3, m.key("refund-", order), map[string]any{
		"amount": m.amount(1, 120), "currency": m.pick(m.currencies), "reason": "requested_by_customer",
	})
	p.Args = json.RawMessage(fmt.Sprintf("[%q, %q]", order, m.id("ch_3", 10)))
	return p
}
