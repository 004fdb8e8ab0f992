package web

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

func TestServe(t *testing.T) {
	t.Parallel()

	t.Run("ServesUntilCancelledThenDrains", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		arrived, release := make(chan struct{}), make(chan struct{})
		handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			close(arrived)
			<-release // a request still running when the server is told to stop
			io.WriteString(w, "finished")
		})
		urls := make(chan string, 1)
		done := make(chan error, 1)
		go func() {
			done <- Serve(ctx, ServeConfig{Addr: "127.0.0.1:0", Handler: handler, Ready: func(u string) { urls <- u }})
		}()
		url := <-urls
		if !strings.HasPrefix(url, "http://127.0.0.1:") {
			t.Fatalf("ready URL %q", url)
		}
		body := make(chan string, 1)
		go func() {
			res, err := http.Get(url)
			if err != nil {
				body <- err.Error()
				return
			}
			defer res.Body.Close()
			b, _ := io.ReadAll(res.Body)
			body <- string(b)
		}()
		<-arrived
		cancel()
		close(release)
		if got := <-body; got != "finished" {
			t.Fatalf("in-flight request got %q, want it to finish", got)
		}
		if err := <-done; err != nil {
			t.Fatalf("Serve returned %v after a clean stop", err)
		}
	})

	t.Run("BusyAddressIsAnError", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		err = Serve(context.Background(), ServeConfig{Addr: ln.Addr().String(), Handler: http.NotFoundHandler()})
		if err == nil || !strings.Contains(err.Error(), "listen on") {
			t.Fatalf("err %v, want a listen error", err)
		}
	})
}

func TestListenURL(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]string{
		"0.0.0.0:8080":   "http://localhost:8080",
		"[::]:8080":      "http://localhost:8080",
		"127.0.0.1:9000": "http://127.0.0.1:9000",
	} {
		tcp, err := net.ResolveTCPAddr("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := listenURL(tcp); got != want {
			t.Errorf("listenURL(%s) = %s, want %s", addr, got, want)
		}
	}
}
