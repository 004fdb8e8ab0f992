package web

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/redrive/redrive/dlq"
)

// Throttle slows, then locks, repeated failed sign-ins for a name and from
// an address. Failures are counted in Postgres, so every console instance
// sees the same count and a restart forgives nothing.
//
// Each failure after SlowAfter doubles the wait before the next attempt
// (SlowBase, then twice that, ...); LockAfter failures within Window lock
// for LockFor. An address gets more room than a name, because many people
// may share one address behind a NAT, but not unlimited room, because one
// address trying many names is password spraying.
type Throttle struct {
	Window        time.Duration // default 15 min
	LockFor       time.Duration // default 15 min
	SlowAfter     int           // default 3
	SlowBase      time.Duration // default 2 s
	LockAfter     int           // default 5
	AddrSlowAfter int           // default 10
	AddrLockAfter int           // default 20
}

func (t Throttle) withDefaults() Throttle {
	if t.Window <= 0 {
		t.Window = 15 * time.Minute
	}
	if t.LockFor <= 0 {
		t.LockFor = 15 * time.Minute
	}
	if t.SlowAfter <= 0 {
		t.SlowAfter = 3
	}
	if t.SlowBase <= 0 {
		t.SlowBase = 2 * time.Second
	}
	if t.LockAfter <= 0 {
		t.LockAfter = 5
	}
	if t.AddrSlowAfter <= 0 {
		t.AddrSlowAfter = 10
	}
	if t.AddrLockAfter <= 0 {
		t.AddrLockAfter = 20
	}
	return t
}

// maxSlowWait caps the doubling wait; beyond it the lock takes over.
const maxSlowWait = time.Minute

// wait returns how long the next attempt must wait given earlier failures
// (newest first), and whether that is a lock rather than a slow-down.
func (t Throttle) wait(failures []time.Time, slowAfter, lockAfter int, now time.Time) (time.Duration, bool) {
	// A lock: lockAfter failures within Window, the last of them less than
	// LockFor ago. Failures are looked up over Window+LockFor, so a burst
	// keeps the lock for its full length after the burst ended.
	for i := 0; i+lockAfter-1 < len(failures); i++ {
		if failures[i].Sub(failures[i+lockAfter-1]) <= t.Window {
			if until := failures[i].Add(t.LockFor); now.Before(until) {
				return until.Sub(now), true
			}
			break
		}
	}
	recent := 0
	for _, f := range failures {
		if now.Sub(f) <= t.Window {
			recent++
		}
	}
	if recent >= slowAfter {
		d := min(t.SlowBase<<min(recent-slowAfter, 10), maxSlowWait)
		if until := failures[0].Add(d); now.Before(until) {
			return until.Sub(now), false
		}
	}
	return 0, false
}

// signInStore is what signing in needs from dlq.
type signInStore interface {
	UserByName(ctx context.Context, name string) (dlq.User, error)
	StartLoginAttempt(ctx context.Context, name, addr string, now time.Time, window time.Duration, limit int) (int64, dlq.LoginHistory, error)
	FinishLoginAttempt(ctx context.Context, r dlq.LoginResult) error
}

// signIn checks passwords under the throttle (handlers.SignInService).
type signIn struct {
	store    signInStore
	throttle Throttle
	now      func() time.Time
	logger   *slog.Logger
}

// SignIn returns the active user name and password belong to. Failures are
// dlq.ErrBadCredentials, whatever was wrong, or a *dlq.ThrottledError when
// there were too many; both are recorded, and the audit trail gets every
// success and every checked failure.
func (s *signIn) SignIn(ctx context.Context, name, password string, actor dlq.Actor) (dlq.User, error) {
	now := s.now()
	limit := max(s.throttle.LockAfter, s.throttle.AddrLockAfter) + 1
	id, h, err := s.store.StartLoginAttempt(ctx, name, actor.RemoteAddr, now, s.throttle.Window+s.throttle.LockFor, limit)
	if err != nil {
		return dlq.User{}, err
	}
	wait, locked := s.throttle.wait(h.ByName, s.throttle.SlowAfter, s.throttle.LockAfter, now)
	if w, l := s.throttle.wait(h.ByAddr, s.throttle.AddrSlowAfter, s.throttle.AddrLockAfter, now); w > wait {
		wait, locked = w, l
	}
	if wait > 0 {
		s.logger.Warn("sign-in throttled", "name", name, "remote_addr", actor.RemoteAddr, "wait", wait, "locked", locked)
		if err := s.store.FinishLoginAttempt(ctx, dlq.LoginResult{AttemptID: id, Outcome: dlq.LoginThrottled}); err != nil {
			return dlq.User{}, err
		}
		return dlq.User{}, &dlq.ThrottledError{RetryAfter: wait, Locked: locked}
	}

	var user *dlq.User
	if u, err := s.store.UserByName(ctx, name); err == nil {
		user = &u
	}
	ok := dlq.CheckPassword(user, password)
	res := dlq.LoginResult{AttemptID: id, Outcome: dlq.LoginFailed, Name: name, Actor: actor, Now: now}
	if ok {
		res.Outcome, res.Name = dlq.LoginSucceeded, user.Name
	}
	if err := s.store.FinishLoginAttempt(ctx, res); err != nil {
		return dlq.User{}, fmt.Errorf("sign in: %w", err)
	}
	if !ok {
		return dlq.User{}, dlq.ErrBadCredentials
	}
	return *user, nil
}
