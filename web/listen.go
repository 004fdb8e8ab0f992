package web

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// ServeConfig says where and how Serve listens.
type ServeConfig struct {
	Addr    string
	Handler http.Handler
	Logger  *slog.Logger
	// WriteTimeout bounds a response; the console streams exports, so it
	// sets this generously. Zero means 30 seconds.
	WriteTimeout time.Duration
	// DrainTimeout is how long in-flight requests get once ctx ends.
	// Zero means 15 seconds.
	DrainTimeout time.Duration
	// Ready, when set, is called with the URL once the listener is open,
	// before the first request is served.
	Ready func(url string)
}

// Serve listens on cfg.Addr and serves cfg.Handler until ctx ends, then
// stops accepting and lets in-flight requests finish within the drain
// timeout. It returns an error only when listening or serving failed.
func Serve(ctx context.Context, cfg ServeConfig) error {
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	srv := &http.Server{
		Handler:           cfg.Handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      cmp.Or(cfg.WriteTimeout, 30*time.Second),
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	if cfg.Ready != nil {
		cfg.Ready(listenURL(ln.Addr()))
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("http server on %s: %w", cfg.Addr, err)
	case <-ctx.Done():
	}
	drainCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cmp.Or(cfg.DrainTimeout, 15*time.Second))
	defer cancel()
	if err := srv.Shutdown(drainCtx); err != nil {
		return fmt.Errorf("http shutdown on %s: %w", cfg.Addr, err)
	}
	return nil
}

// listenURL is the URL a person can open for addr: an unspecified host
// (":8080", "0.0.0.0:8080") reads as localhost.
func listenURL(addr net.Addr) string {
	host, port, _ := net.SplitHostPort(addr.String())
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}
