package worker_test

import (
	"context"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/postgres"
	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/worker"
)

// cutProxy forwards TCP connections to Postgres until cut: then it closes
// every connection and refuses new ones until restored, the shape of a
// network partition between the workers and the database (Postgres itself
// keeps running, so pg_postmaster_start_time says nothing happened).
type cutProxy struct {
	ln       net.Listener
	upstream string

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]struct{}
}

func startCutProxy(t *testing.T, upstream string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, upstream: upstream, conns: map[net.Conn]struct{}{}}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		p.cut()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { p.serve(c) })
		}
	})
	return p
}

func (p *cutProxy) serve(client net.Conn) {
	p.mu.Lock()
	if p.down {
		p.mu.Unlock()
		client.Close()
		return
	}
	server, err := net.Dial("tcp", p.upstream)
	if err != nil {
		p.mu.Unlock()
		client.Close()
		return
	}
	p.conns[client], p.conns[server] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(server, client); done <- struct{}{} }()
	go func() { _, _ = io.Copy(client, server); done <- struct{}{} }()
	<-done
	client.Close()
	server.Close()
	<-done
	p.mu.Lock()
	delete(p.conns, client)
	delete(p.conns, server)
	p.mu.Unlock()
}

// cut closes every forwarded connection and refuses new ones.
func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
}

func (p *cutProxy) restore() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}

// dsn is dsn with its host and port replaced by the proxy's.
func (p *cutProxy) dsn(t *testing.T, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("DSN %q is not a URL: %v", dsn, err)
	}
	u.Host = p.ln.Addr().String()
	return u.String()
}

// TestLeasesLapsedInANetworkCutStayWithTheirWorkers: the workers lose the
// database for longer than a lease, though Postgres never restarts. Every
// lease lapses meanwhile, and once the network is back the rescuer must
// leave them to their owners, which renew them at their next heartbeat.
// It used to take them at its first pass: a healthy worker's job ran twice,
// and on its last attempt was dead-lettered as lease_expired (the
// reliability suite's database restart caught it when recovery outlasted
// the grace counted from pg_postmaster_start_time).
func TestLeasesLapsedInANetworkCutStayWithTheirWorkers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	u, err := url.Parse(b.db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	proxy := startCutProxy(t, u.Host)
	ctx := context.Background()
	db, err := postgres.Open(ctx, proxy.dsn(t, b.db.DSN))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	// The work goes on whatever the network does, until the test
	// releases it.
	started, release := make(chan struct{}, 1), make(chan struct{})
	b.reg.Register("test.task", func(ctx context.Context, job *worker.Job) error {
		started <- struct{}{}
		<-release
		return nil
	}, worker.TaskOptions{})

	// The owner renews its 2 s lease every 500 ms; the other worker looks
	// for expired leases every 50 ms. Both reach Postgres through the
	// proxy.
	owner := b.config("cut-owner")
	owner.HeartbeatInterval, owner.RestartGrace = 500*time.Millisecond, 2*time.Second
	rescuer := b.config("cut-rescuer")
	rescuer.Queues, rescuer.RestartGrace = []string{"elsewhere"}, 2*time.Second
	for _, cfg := range []worker.Config{owner, rescuer} {
		w, err := worker.New(storetest.NewStores(db).Queue, cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		t.Cleanup(func() {
			cancel()
			<-done
		})
	}
	// Released at the end should the test fail first (cleanups run last
	// registered first: before the workers stop).
	released := false
	releaseOnce := func() {
		if !released {
			released = true
			close(release)
		}
	}
	t.Cleanup(releaseOnce)
	id := b.enqueue(t, dlq.EnqueueParams{Task: "test.task", MaxAttempts: 1})
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the job did not start")
	}
	proxy.cut()
	// b.db reaches Postgres directly: it sees the lease lapse.
	waitFor(t, 10*time.Second, "the job's 2 s lease to lapse during the cut", func() bool {
		return b.count(t, `SELECT count(*) FROM jobs WHERE id = $1 AND lease_expires_at < now()`, id) == 1
	})
	proxy.restore()
	// The job works on until its owner has renewed the lease; a rescuer
	// that took it first has left it running no more.
	waitFor(t, 10*time.Second, "the owner to renew the lapsed lease", func() bool {
		return b.count(t, `SELECT count(*) FROM jobs WHERE id = $1 AND (state <> 'running' OR lease_expires_at > now())`, id) == 1
	})
	releaseOnce()
	j := b.waitJob(t, id, dlq.StateSucceeded, 20*time.Second)
	if j.Attempt != 1 || len(j.Errors) != 0 {
		t.Fatalf("after a network cut past the lease the job succeeded on attempt %d with history %+v; want attempt 1 with no rescue", j.Attempt, j.Errors)
	}
	select {
	case <-started:
		t.Fatal("the job ran twice: its lease was rescued from a live worker")
	default:
	}
}
