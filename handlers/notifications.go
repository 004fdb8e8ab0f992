package handlers

import (
	"context"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/views"
)

// NotificationLister is what the notifications page needs from the store.
type NotificationLister interface {
	NotificationDeliveries(ctx context.Context, limit int) ([]dlq.NotificationDelivery, error)
}

// notificationPageRows is how many deliveries the page lists.
const notificationPageRows = 100

// AdminNotifications renders where notifications go and how the latest
// deliveries went, those given up first. endpoints are the configured
// webhooks, redacted (their URLs are secrets).
func AdminNotifications(store NotificationLister, endpoints []string, version string) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := mayAdminister(c); err != nil {
			return err
		}
		ds, err := store.NotificationDeliveries(c.Request().Context(), notificationPageRows)
		if err != nil {
			return err
		}
		v := views.NotificationsView{Endpoints: endpoints}
		for _, d := range ds {
			row := views.NotificationRow{EventID: d.ID, Event: strings.ReplaceAll(d.Kind, "_", " "), Subject: d.Subject,
				Link: d.ConsolePath(), At: d.At, Endpoint: d.Endpoint, State: d.State,
				Attempts: d.Attempts, LastError: d.LastError, Delivered: d.DeliveredAt}
			if d.LastStatus != nil {
				row.Status = strconv.Itoa(*d.LastStatus)
			}
			if d.State == dlq.DeliveryPending {
				next := d.NextAttemptAt
				row.Next = &next
			}
			v.Deliveries = append(v.Deliveries, row)
		}
		c.Response().Header().Set("Cache-Control", "no-store")
		return Render(c, 200, views.Layout(Meta(c, "Notifications", "admin", version), views.Notifications(v)))
	}
}
