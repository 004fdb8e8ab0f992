package web

import (
	"fmt"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
)

// httpMetrics records request durations by route pattern (not by raw path,
// which would make one time series per dead-letter id).
type httpMetrics struct {
	duration *prometheus.HistogramVec
}

func newHTTPMetrics(reg prometheus.Registerer) (*httpMetrics, error) {
	m := &httpMetrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "redrive_http_request_duration_seconds",
			Help:    "Console HTTP request durations by method, route and status.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"method", "route", "status"}),
	}
	if err := reg.Register(m.duration); err != nil {
		return nil, fmt.Errorf("register http metrics: %w", err)
	}
	return m, nil
}

func (m *httpMetrics) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		status := c.Response().Status
		if err != nil {
			// The error handler has not run yet; classify gives the status it will write.
			status, _ = classify(err)
		}
		route := c.Path()
		if route == "" {
			route = "unmatched"
		}
		m.duration.WithLabelValues(c.Request().Method, route, strconv.Itoa(status)).Observe(time.Since(start).Seconds())
		return err
	}
}
