package demo

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/redrive/redrive/worker"
)

// The shop's tasks: the ones `redrive seed` writes letters of (seed's
// catalog names them by these constants), so that a seeded letter replayed
// in `redrive dev` runs instead of dying again as UnknownTask, and the one
// the demo incident is about. Each stands in for a call to a dependency of
// the shop. The payments tasks call the payments provider, whose state is a
// row of demo_dependencies (outage.go): they fail while it is down and
// succeed once it is back. The others' dependencies are up in the demo, so
// they succeed: whatever made their letters fail has passed.
const (
	TaskCharge             = "payments.charge"
	TaskRefund             = "payments.refund"
	TaskSendReceipt        = "emails.send_receipt"
	TaskSendPasswordReset  = "emails.send_password_reset"
	TaskReserveInventory   = "inventory.reserve"
	TaskDeliverWebhook     = "webhooks.deliver"
	TaskGenerateReport     = "reports.generate"
	TaskSyncCRM            = "users.sync_crm"
	TaskIndexProduct       = "search.index_product"
	TaskGenerateThumbnails = "media.generate_thumbnails"
)

// ShopTaskNames lists the shop's tasks.
func ShopTaskNames() []string {
	return []string{TaskCharge, TaskRefund, TaskSendReceipt, TaskSendPasswordReset, TaskReserveInventory,
		TaskDeliverWebhook, TaskGenerateReport, TaskSyncCRM, TaskIndexProduct, TaskGenerateThumbnails}
}

// ShopQueues are the queues the shop's tasks run on.
func ShopQueues() []string { return []string{"payments", "emails", "default", "webhooks"} }

func (h *handlers) registerShop(reg *worker.Registry, opts worker.TaskOptions) {
	reg.Register(TaskCharge, h.payments("POST", "/v1/payment_intents"), opts)
	reg.Register(TaskRefund, h.payments("POST", "/v1/refunds"), opts)
	for _, task := range ShopTaskNames()[2:] {
		reg.Register(task, h.dependencyUp, opts)
	}
}

// payments calls the payments provider at method path: a transient
// failure while the provider is down, as its client would see it.
func (h *handlers) payments(method, path string) worker.Handler {
	return func(ctx context.Context, job *worker.Job) error {
		if err := decodeObject(job); err != nil {
			return err
		}
		down, err := dependencyDown(ctx, h.db, PaymentsProvider)
		if err != nil {
			return err
		}
		if down {
			return fmt.Errorf("%s for job %d: %w", job.Task, job.ID, worker.WithTraceback(&ServiceUnavailableError{
				Service: PaymentsProvider, Method: method, Path: path,
				RequestID: fmt.Sprintf("req_%08x", hash(fmt.Sprint(job.ID, job.Attempt))),
			}))
		}
		return nil
	}
}

// dependencyUp is a shop task whose dependency answers: it checks its
// payload and succeeds.
func (h *handlers) dependencyUp(ctx context.Context, job *worker.Job) error {
	return decodeObject(job)
}

// decodeObject checks that kwargs are a JSON object, as every shop task's
// are; what is in it the demo does not need.
func decodeObject(job *worker.Job) error {
	var kw map[string]json.RawMessage
	return decode(job, &kw)
}
