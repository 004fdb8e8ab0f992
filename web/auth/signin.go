package auth

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/redrive/redrive/dlq"
)

// Throttle slows, then locks, repeated failed sign-ins. Failures are
// counted in Postgres, so every console instance sees the same count and a
// restart forgives nothing. Three counts, each answering its own attack:
//
//   - per name and address together: SlowAfter failures within Window
//     double the wait before the next attempt (SlowBase, then twice that,
//     ...); LockAfter lock that address out of that name for LockFor. An
//     attacker locks only himself out: the real user, at another address,
//     is not touched by it.
//   - per address, any name: the same with AddrSlowAfter and
//     AddrLockAfter. More room than a name, because many people may share
//     one address behind a NAT, but not unlimited, because one address
//     trying many names is password spraying.
//   - per name, any address: NameSlowAfter failures within NameWindow
//     start a wait that doubles from SlowBase up to NameMaxWait, and never
//     a lock, so that a guesser spread over many addresses is slowed to
//     about one guess per NameMaxWait without anyone being locked out.
//     Addresses the name signed in from within KnownFor are spared this
//     wait: the user's usual address keeps working during such an attack.
type Throttle struct {
	Window        time.Duration // default 15 min
	LockFor       time.Duration // default 15 min
	SlowAfter     int           // default 3
	SlowBase      time.Duration // default 2 s
	LockAfter     int           // default 5
	AddrSlowAfter int           // default 10
	AddrLockAfter int           // default 20
	NameSlowAfter int           // default 10
	NameWindow    time.Duration // default 1 h
	NameMaxWait   time.Duration // default 1 min
	KnownFor      time.Duration // default 30 days
}

// Defaults returns t with every unset field at its default.
func (t Throttle) Defaults() Throttle {
	t.Window = cmp.Or(t.Window, 15*time.Minute)
	t.LockFor = cmp.Or(t.LockFor, 15*time.Minute)
	t.SlowAfter = cmp.Or(t.SlowAfter, 3)
	t.SlowBase = cmp.Or(t.SlowBase, 2*time.Second)
	t.LockAfter = cmp.Or(t.LockAfter, 5)
	t.AddrSlowAfter = cmp.Or(t.AddrSlowAfter, 10)
	t.AddrLockAfter = cmp.Or(t.AddrLockAfter, 20)
	t.NameSlowAfter = cmp.Or(t.NameSlowAfter, 10)
	t.NameWindow = cmp.Or(t.NameWindow, time.Hour)
	t.NameMaxWait = cmp.Or(t.NameMaxWait, time.Minute)
	t.KnownFor = cmp.Or(t.KnownFor, 30*24*time.Hour)
	return t
}

// maxSlowWait caps the doubling wait where a lock takes over.
const maxSlowWait = time.Minute

// throttleRule is one of the three counts.
type throttleRule struct {
	window    time.Duration
	slowAfter int
	slowBase  time.Duration
	maxWait   time.Duration
	lockAfter int // 0: never locks
	lockFor   time.Duration
}

func (t Throttle) pairRule() throttleRule {
	return throttleRule{t.Window, t.SlowAfter, t.SlowBase, maxSlowWait, t.LockAfter, t.LockFor}
}

func (t Throttle) addrRule() throttleRule {
	return throttleRule{t.Window, t.AddrSlowAfter, t.SlowBase, maxSlowWait, t.AddrLockAfter, t.LockFor}
}

func (t Throttle) nameRule() throttleRule {
	return throttleRule{t.NameWindow, t.NameSlowAfter, t.SlowBase, t.NameMaxWait, 0, 0}
}

// limit is how many failures of each kind must be read for the rules to
// decide: enough for a lock, or for the doubling wait to reach its cap.
func (t Throttle) limit() int {
	return max(t.LockAfter, t.AddrLockAfter, t.NameSlowAfter+doublingsToCap(t.SlowBase, t.NameMaxWait)) + 1
}

func doublingsToCap(base, maxWait time.Duration) int {
	n := 0
	for d := base; d < maxWait && n < 30; d *= 2 {
		n++
	}
	return n
}

// wait returns how long the next attempt must wait given earlier failures
// (newest first), and whether that is a lock rather than a slow-down.
func (r throttleRule) wait(failures []time.Time, now time.Time) (time.Duration, bool) {
	// A lock: lockAfter failures within the window, the last of them less
	// than lockFor ago. Failures are looked up over window+lockFor, so a
	// burst keeps the lock for its full length after the burst ended.
	for i := 0; r.lockAfter > 0 && i+r.lockAfter-1 < len(failures); i++ {
		if failures[i].Sub(failures[i+r.lockAfter-1]) <= r.window {
			if until := failures[i].Add(r.lockFor); now.Before(until) {
				return until.Sub(now), true
			}
			break
		}
	}
	recent := 0
	for _, f := range failures {
		if now.Sub(f) <= r.window {
			recent++
		}
	}
	if recent >= r.slowAfter {
		d := min(r.slowBase<<min(recent-r.slowAfter, 30), r.maxWait)
		if until := failures[0].Add(d); now.Before(until) {
			return until.Sub(now), false
		}
	}
	return 0, false
}

// signInStore is what signing in needs from dlq.
type signInStore interface {
	UserByName(ctx context.Context, name string) (dlq.User, error)
	StartLoginAttempt(ctx context.Context, a dlq.LoginAttempt) (int64, dlq.LoginHistory, error)
	FinishLoginAttempt(ctx context.Context, r dlq.LoginResult) error
}

// SignIn checks passwords under the throttle (handlers.SignInService).
type SignIn struct {
	store    signInStore
	throttle Throttle
	now      func() time.Time
	logger   *slog.Logger
}

// SignIn returns the active user name and password belong to. Failures are
// dlq.ErrBadCredentials, whatever was wrong, or a *dlq.ThrottledError when
// there were too many; both are recorded, and the audit trail gets every
// success and every checked failure.
func (s *SignIn) SignIn(ctx context.Context, name, password string, actor dlq.Actor) (dlq.User, error) {
	now, t := s.now(), s.throttle
	id, h, err := s.store.StartLoginAttempt(ctx, dlq.LoginAttempt{
		Name: name, Addr: actor.RemoteAddr, Now: now, Limit: t.limit(),
		Since: now.Add(-(t.Window + t.LockFor)), NameSince: now.Add(-t.NameWindow), KnownSince: now.Add(-t.KnownFor),
	})
	if err != nil {
		return dlq.User{}, err
	}
	wait, locked := t.pairRule().wait(h.ByPair, now)
	if w, l := t.addrRule().wait(h.ByAddr, now); w > wait {
		wait, locked = w, l
	}
	if !h.KnownAddr {
		if w, l := t.nameRule().wait(h.ByName, now); w > wait {
			wait, locked = w, l
		}
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
