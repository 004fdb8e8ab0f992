// Package demo holds example tasks and a producer that keeps a realistic mix
// of jobs flowing, so `redrive dev` shows a live console: mostly successes,
// some retries, and a trickle of dead letters of every kind (permanent,
// exhausted, panicking).
package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/redrive/redrive/worker"
)

// The demo task names.
const (
	TaskNoop              = "demo.noop"
	TaskSleep             = "demo.sleep"
	TaskFlaky             = "demo.flaky"
	TaskAlwaysFail        = "demo.always_fail"
	TaskPermanent         = "demo.permanent"
	TaskPanic             = "demo.panic"
	TaskApplyProductEvent = "demo.apply_product_event"
)

// TaskNames lists every demo task, the shop's included.
func TaskNames() []string {
	return append([]string{TaskNoop, TaskSleep, TaskFlaky, TaskAlwaysFail, TaskPermanent, TaskPanic, TaskApplyProductEvent},
		ShopTaskNames()...)
}

// maxSleep bounds demo.sleep so a typo in kwargs cannot park a slot for hours.
const maxSleep = 10 * time.Minute

// Register adds the demo tasks to reg, the shop's included. db holds the
// demo's tables: the products demo.apply_product_event writes, and the
// dependencies the shop's tasks call (outage.go).
func Register(reg *worker.Registry, db *sqlx.DB) {
	h := &handlers{db: db}
	quick := worker.TaskOptions{Timeout: 30 * time.Second}
	reg.Register(TaskNoop, h.noop, quick)
	reg.Register(TaskSleep, h.sleep, worker.TaskOptions{Timeout: maxSleep + time.Minute})
	reg.Register(TaskFlaky, h.flaky, quick)
	reg.Register(TaskAlwaysFail, h.alwaysFail, quick)
	reg.Register(TaskPermanent, h.permanent, quick)
	reg.Register(TaskPanic, h.crash, quick)
	reg.Register(TaskApplyProductEvent, h.applyProductEvent, quick)
	h.registerShop(reg, quick)
}

type handlers struct {
	db *sqlx.DB
}

// decode reads a job's kwargs into v. Kwargs that do not parse will not
// parse on a retry either: the failure is permanent. The error says where
// and what kind of problem, never the payload: kwargs carry passwords and
// card numbers, and an error message is read by everyone who reads the
// dead letters (the console masks what it can recognise, a careful handler
// does not rely on it).
func decode(job *worker.Job, v any) error {
	if err := json.Unmarshal(job.Kwargs, v); err != nil {
		return worker.Permanent(worker.WithTraceback(&ValidationError{
			Field: "kwargs", Problem: decodeProblem(err), Context: "task " + job.Task,
		}))
	}
	return nil
}

// decodeProblem describes a JSON error without quoting the payload:
// encoding/json's own messages can quote a character or a number of it.
func decodeProblem(err error) string {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return fmt.Sprintf("not valid JSON at byte %d", syntax.Offset)
	case errors.As(err, &typ):
		kind, _, _ := strings.Cut(typ.Value, " ") // "number -5": the kind, not the value
		return fmt.Sprintf("field %q must be %s, not a JSON %s", typ.Field, typ.Type, kind)
	default:
		return "not a JSON object of the expected fields"
	}
}

func (h *handlers) noop(ctx context.Context, job *worker.Job) error {
	return nil
}

// sleep waits kwargs.seconds, returning early when its context ends.
func (h *handlers) sleep(ctx context.Context, job *worker.Job) error {
	var kw struct {
		Seconds float64 `json:"seconds"`
	}
	if err := decode(job, &kw); err != nil {
		return err
	}
	d := time.Duration(kw.Seconds * float64(time.Second))
	if d < 0 || d > maxSleep {
		return worker.Permanent(worker.WithTraceback(&ValidationError{
			Field: "seconds", Value: strconv.FormatFloat(kw.Seconds, 'f', -1, 64),
			Problem: fmt.Sprintf("must be between 0 and %.0f", maxSleep.Seconds()),
		}))
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("sleep interrupted after part of %s: %w", d, ctx.Err())
	}
}

// paymentKwargs is the payload of the payment-flavoured demo tasks.
type paymentKwargs struct {
	OrderID   string      `json:"order_id"`
	Amount    json.Number `json:"amount"`
	Currency  string      `json:"currency"`
	Email     string      `json:"email"`
	FailTimes int         `json:"fail_times"`
	Kind      string      `json:"kind"`
	SKU       string      `json:"sku"`
	Warehouse int         `json:"warehouse"`
}

// flaky fails transiently on its first kwargs.fail_times attempts, then
// succeeds: a payment gateway that is restarting.
func (h *handlers) flaky(ctx context.Context, job *worker.Job) error {
	var kw paymentKwargs
	if err := decode(job, &kw); err != nil {
		return err
	}
	if job.Attempt <= kw.FailTimes {
		return capturePayment(kw, job.Attempt)
	}
	return nil
}

// capturePayment stands in for a gateway client whose dial fails; the
// traceback is taken here, where the failure is detected.
func capturePayment(kw paymentKwargs, attempt int) error {
	// Which gateway replica refused varies, as behind a load balancer.
	ip := fmt.Sprintf("10.0.4.%d", 20+attempt%4)
	return fmt.Errorf("capture %s %s for order %s: %w", kw.Amount, kw.Currency, kw.OrderID,
		worker.WithTraceback(connectionRefused("payments-gateway", ip, 443)))
}

// alwaysFail fails transiently on every attempt, so the job exhausts its
// attempts: an upstream in a long outage.
func (h *handlers) alwaysFail(ctx context.Context, job *worker.Job) error {
	var kw paymentKwargs
	if err := decode(job, &kw); err != nil {
		return err
	}
	return reserveStock(kw.SKU, kw.OrderID, job.ID, job.Attempt)
}

func reserveStock(sku, orderID string, jobID int64, attempt int) error {
	return fmt.Errorf("reserve stock for order %s: %w", orderID, worker.WithTraceback(&ServiceUnavailableError{
		Service: "inventory-service", Method: "POST", Path: "/v2/reservations/" + sku,
		RequestID: fmt.Sprintf("req_%08x", hash(fmt.Sprint(jobID, attempt))),
	}))
}

// permanent fails permanently at once: kwargs.kind "validation" rejects the
// customer's e-mail, anything else is a declined card.
func (h *handlers) permanent(ctx context.Context, job *worker.Job) error {
	var kw paymentKwargs
	if err := decode(job, &kw); err != nil {
		return err
	}
	if kw.Kind == "validation" {
		return worker.Permanent(validateCustomer(kw))
	}
	return worker.Permanent(chargeCard(kw))
}

func validateCustomer(kw paymentKwargs) error {
	// The address is the customer's: the order says which one it is.
	return worker.WithTraceback(&ValidationError{
		Field: "customer_email", Problem: "address has no domain part", Context: "order " + kw.OrderID,
	})
}

func chargeCard(kw paymentKwargs) error {
	codes := []string{"insufficient_funds", "expired_card", "do_not_honor", "card_velocity_exceeded"}
	return worker.WithTraceback(&PaymentDeclined{
		OrderID: kw.OrderID, Amount: kw.Amount.String(), Currency: kw.Currency,
		DeclineCode: codes[hash(kw.OrderID)%uint32(len(codes))],
		ChargeID:    fmt.Sprintf("ch_%012x", hash(kw.OrderID+"charge")),
	})
}

// crash panics on a real bug: indexing the line items of a warehouse that
// has none.
func (h *handlers) crash(ctx context.Context, job *worker.Job) error {
	var kw paymentKwargs
	if err := decode(job, &kw); err != nil {
		return err
	}
	_ = allocateShipment(kw.OrderID, kw.Warehouse)
	return nil
}

type lineItem struct {
	SKU string
	Qty int
}

// allocateShipment assumes every warehouse has line items for the order.
func allocateShipment(orderID string, warehouse int) lineItem {
	byWarehouse := make([][]lineItem, 3)
	return byWarehouse[warehouse%3][0] // index out of range: the bug
}

// applyProductEvent applies a product price change at most once per event
// and never lets an older version overwrite a newer one.
func (h *handlers) applyProductEvent(ctx context.Context, job *worker.Job) error {
	var kw struct {
		EventID   string      `json:"event_id"`
		ProductID string      `json:"product_id"`
		Version   int64       `json:"version"`
		Price     json.Number `json:"price"`
	}
	if err := decode(job, &kw); err != nil {
		return err
	}
	for _, c := range []struct {
		field, value string
		bad          bool
	}{
		{"event_id", kw.EventID, kw.EventID == ""},
		{"product_id", kw.ProductID, kw.ProductID == ""},
		{"version", strconv.FormatInt(kw.Version, 10), kw.Version < 1},
		{"price", kw.Price.String(), kw.Price == ""},
	} {
		if c.bad {
			return worker.Permanent(worker.WithTraceback(&ValidationError{
				Field: c.field, Value: c.value, Problem: "is required and must be positive", Context: "product event " + kw.EventID,
			}))
		}
	}
	log := worker.Logger(ctx)
	_, err := worker.ProcessOnce(ctx, h.db, kw.EventID, func(tx *sqlx.Tx) error {
		changed, err := applyProductVersion(ctx, tx, kw.ProductID, kw.Version, kw.Price.String())
		if err != nil {
			return err
		}
		if !changed {
			log.Info("stale product event ignored: a newer version is stored",
				"product_id", kw.ProductID, "version", kw.Version, "event_id", kw.EventID)
		}
		return nil
	})
	return err
}

// hash gives stable pseudo-random choices from ids, so a replayed job fails
// the same way it did the first time.
func hash(s string) uint32 {
	f := fnv.New32a()
	_, _ = f.Write([]byte(s))
	return f.Sum32()
}
