package dlq

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jmoiron/sqlx"
	"golang.org/x/crypto/bcrypt"
)

// User is someone who signs in to the console with a password.
type User struct {
	ID   int64  `db:"id" json:"id"`
	Name string `db:"name" json:"name"`
	Role Role   `db:"role" json:"role"`
	// PasswordHash is a bcrypt hash; it never leaves the server.
	PasswordHash []byte `db:"password_hash" json:"-"`
	// SessionEpoch is written into each session; a session carrying an
	// older epoch is over. It goes up when the password changes, the user
	// is disabled, or their sessions are ended everywhere.
	SessionEpoch int64      `db:"session_epoch" json:"-"`
	DisabledAt   *time.Time `db:"disabled_at" json:"disabled_at"`
	CreatedAt    time.Time  `db:"created_at" json:"created_at"`
	UpdatedAt    time.Time  `db:"updated_at" json:"updated_at"`
}

// Active reports whether the user may sign in.
func (u User) Active() bool { return u.DisabledAt == nil }

// Password rules. bcrypt reads only the first 72 bytes: a longer password
// is refused rather than silently shortened.
const (
	MinPasswordLen   = 10
	MaxPasswordBytes = 72
)

// ErrBadCredentials means a sign-in named no active user or the wrong
// password. Which of the two is deliberately not said.
var ErrBadCredentials = errors.New("wrong username or password")

// ErrLastAdmin means a change would leave no active admin to manage users.
var ErrLastAdmin = &Error{Code: EConflict, Message: "that would leave no active admin"}

// userNamePattern matches the users_name_valid constraint: letters,
// digits and . _ @ + -, so an e-mail address from the SSO proxy fits.
var userNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@+-]{0,99}$`)

// ValidUserName reports whether name can be a user's name.
func ValidUserName(name string) bool { return userNamePattern.MatchString(name) }

// noSuchUserHash is compared against when a sign-in names nobody, so that
// an unknown name costs the same bcrypt time as a wrong password and the
// response time does not reveal which names exist. Same cost as new hashes.
const noSuchUserHash = "$2a$10$Fx1DGpzXkQLGIXaK91e2JeAP4iIJ57dTSCajR1Ujb.Fxg2R4iLkFO"

// ValidatePassword returns what is wrong with pw as the new password of
// the user called name, or "". Length alone let "aaaaaaaaaa" through, so
// a password is also refused when it is one character repeated, the user's
// own name, or on the bundled list of common passwords.
func ValidatePassword(name, pw string) string {
	switch {
	case utf8.RuneCountInString(pw) < MinPasswordLen:
		return fmt.Sprintf("must be at least %d characters", MinPasswordLen)
	case len(pw) > MaxPasswordBytes:
		return fmt.Sprintf("must be at most %d bytes", MaxPasswordBytes)
	case strings.TrimSpace(pw) == "":
		return "must not be blank"
	case oneCharRepeated(pw):
		return "must not be one character repeated"
	case name != "" && strings.EqualFold(strings.TrimSpace(pw), strings.TrimSpace(name)):
		return "must not be the user name"
	case IsCommonPassword(pw):
		return "is one of the most common passwords, which are guessed first; choose another"
	}
	return ""
}

// HashPassword validates pw as the new password of the user called name
// and returns its bcrypt hash at bcrypt's default cost (cost 0) or the one
// given (tests use the minimum).
func HashPassword(name, pw string, cost int) ([]byte, error) {
	if msg := ValidatePassword(name, pw); msg != "" {
		return nil, &ValidationError{Fields: map[string]string{"password": msg}}
	}
	if cost == 0 {
		cost = bcrypt.DefaultCost
	}
	h, err := bcrypt.GenerateFromPassword([]byte(pw), cost)
	if err != nil {
		return nil, fmt.Errorf("hash password: %w", err)
	}
	return h, nil
}

// CheckPassword reports whether pw matches the user's hash. A nil user
// (nobody by that name) is checked against a hash that never matches, in
// the same time.
func CheckPassword(u *User, pw string) bool {
	hash := []byte(noSuchUserHash)
	if u != nil {
		hash = u.PasswordHash
	}
	ok := bcrypt.CompareHashAndPassword(hash, []byte(pw)) == nil
	return ok && u != nil && u.Active()
}

// userChangeLockKey is the pg_advisory_xact_lock key that serialises
// changes to users.
const userChangeLockKey = 7_240_117_312

const userColumns = `id, name, role, password_hash, session_epoch, disabled_at, created_at, updated_at`

// NewUser asks for a user to be created.
type NewUser struct {
	Name         string
	Role         Role
	PasswordHash []byte
	Actor        Actor
	Now          time.Time
}

func (p NewUser) validate() error {
	problems := map[string]string{}
	if !ValidUserName(p.Name) {
		problems["name"] = "use 1 to 100 letters, digits and . _ @ + -, starting with a letter or digit"
	}
	if !p.Role.Valid() {
		problems["role"] = "must be viewer, operator or admin"
	}
	if len(p.PasswordHash) == 0 {
		problems["password"] = "is required"
	}
	if len(problems) > 0 {
		return &ValidationError{Fields: problems}
	}
	return nil
}

// CreateUser adds a user and audits it in one transaction. A name already
// taken (in any case) is ErrConflict.
func (s *Store) CreateUser(ctx context.Context, p NewUser) (User, error) {
	if err := p.validate(); err != nil {
		return User{}, err
	}
	var u User
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		err := tx.GetContext(ctx, &u, `INSERT INTO users (name, role, password_hash, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $4) RETURNING `+userColumns, p.Name, p.Role, bytea(p.PasswordHash), p.Now)
		if err != nil {
			if errors.Is(translate(err), ErrConflict) {
				return Errorf(EConflict, "there is already a user called %s", p.Name)
			}
			return translate(err)
		}
		return auditUserChange(ctx, tx, p.Actor, p.Now, "create", u)
	})
	if err != nil {
		return User{}, fmt.Errorf("create user: %w", err)
	}
	return u, nil
}

// UserChange is who changes a user, and when.
type UserChange struct {
	Actor Actor
	Now   time.Time
}

// SetPassword replaces a user's password hash and ends their sessions.
func (s *Store) SetPassword(ctx context.Context, name string, hash []byte, c UserChange) (User, error) {
	if len(hash) == 0 {
		return User{}, &ValidationError{Fields: map[string]string{"password": "is required"}}
	}
	return s.changeUser(ctx, name, c, "password", `
		UPDATE users SET password_hash = $3, session_epoch = session_epoch + 1, updated_at = $2
		WHERE lower(name) = lower($1) RETURNING `+userColumns, bytea(hash))
}

// DisableUser stops a user signing in and ends their sessions and the use
// of their tokens at once. The last active admin cannot be disabled.
func (s *Store) DisableUser(ctx context.Context, name string, c UserChange) (User, error) {
	return s.changeUser(ctx, name, c, "disable", `
		UPDATE users SET disabled_at = coalesce(disabled_at, $2), session_epoch = session_epoch + 1, updated_at = $2
		WHERE lower(name) = lower($1) RETURNING `+userColumns)
}

// EnableUser lets a disabled user sign in again (with their password).
func (s *Store) EnableUser(ctx context.Context, name string, c UserChange) (User, error) {
	return s.changeUser(ctx, name, c, "enable", `
		UPDATE users SET disabled_at = NULL, updated_at = $2
		WHERE lower(name) = lower($1) RETURNING `+userColumns)
}

// SetRole changes a user's role; it takes effect on their next request.
// The last active admin cannot be demoted.
func (s *Store) SetRole(ctx context.Context, name string, role Role, c UserChange) (User, error) {
	if !role.Valid() {
		return User{}, &ValidationError{Fields: map[string]string{"role": "must be viewer, operator or admin"}}
	}
	return s.changeUser(ctx, name, c, "role", `
		UPDATE users SET role = $3, updated_at = $2
		WHERE lower(name) = lower($1) RETURNING `+userColumns, role)
}

// changeUser runs one UPDATE of a user by name ($1 the name, $2 the time,
// $3 the new value, if any), checks that an active admin remains, and
// audits the change, in one transaction.
func (s *Store) changeUser(ctx context.Context, name string, c UserChange, op, query string, value ...any) (User, error) {
	var u User
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		// Serialise user changes, so that two admins demoting each other
		// at once cannot both see the other still in place.
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, userChangeLockKey); err != nil {
			return fmt.Errorf("lock users: %w", err)
		}
		var wasAdmin bool
		err := tx.GetContext(ctx, &wasAdmin, `SELECT role = 'admin' AND disabled_at IS NULL FROM users WHERE lower(name) = lower($1)`, name)
		if errors.Is(translate(err), ErrNotFound) {
			return fmt.Errorf("%w: there is no user called %s", ErrNotFound, name)
		}
		if err != nil {
			return fmt.Errorf("read user: %w", err)
		}
		if err := tx.GetContext(ctx, &u, query, append([]any{name, c.Now}, value...)...); err != nil {
			return translate(err)
		}
		if wasAdmin && (u.Role != RoleAdmin || !u.Active()) {
			if err := requireAdmin(ctx, tx); err != nil {
				return err
			}
		}
		return auditUserChange(ctx, tx, c.Actor, c.Now, op, u)
	})
	if err != nil {
		return User{}, fmt.Errorf("change user %s: %w", name, err)
	}
	return u, nil
}

// requireAdmin refuses a change that takes away the last active admin: the
// console would have nobody left to manage users (the CLI still could, but
// nobody should find that out by accident).
func requireAdmin(ctx context.Context, tx *sqlx.Tx) error {
	var ok bool
	err := tx.GetContext(ctx, &ok, `SELECT EXISTS (SELECT 1 FROM users WHERE role = 'admin' AND disabled_at IS NULL)`)
	if err != nil {
		return fmt.Errorf("look for an admin: %w", err)
	}
	if !ok {
		return ErrLastAdmin
	}
	return nil
}

func auditUserChange(ctx context.Context, tx *sqlx.Tx, a Actor, now time.Time, op string, u User) error {
	_, err := appendAudit(ctx, tx, AuditEntry{
		At: now, Actor: a.Name, Action: ActionUserChange,
		RequestID: a.RequestID, RemoteAddr: a.RemoteAddr, UserAgent: a.UserAgent,
		Details: mustJSON(map[string]any{"op": op, "user": u.Name, "role": u.Role, "disabled": !u.Active()}),
	})
	return err
}

// User returns the user with id; ErrNotFound if there is none. It is read
// on every signed-in request, by primary key.
func (s *Store) User(ctx context.Context, id int64) (User, error) {
	var u User
	if err := s.db.GetContext(ctx, &u, `SELECT `+userColumns+` FROM users WHERE id = $1`, id); err != nil {
		return User{}, fmt.Errorf("user %d: %w", id, translate(err))
	}
	return u, nil
}

// UserByName returns the user called name, in any case.
func (s *Store) UserByName(ctx context.Context, name string) (User, error) {
	var u User
	if err := s.db.GetContext(ctx, &u, `SELECT `+userColumns+` FROM users WHERE lower(name) = lower($1)`, name); err != nil {
		return User{}, fmt.Errorf("user %s: %w", name, translate(err))
	}
	return u, nil
}

// Users lists every user by name.
func (s *Store) Users(ctx context.Context) ([]User, error) {
	var out []User
	if err := s.db.SelectContext(ctx, &out, `SELECT `+userColumns+` FROM users ORDER BY lower(name)`); err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	return out, nil
}

// CountUsers returns how many users there are, disabled ones included.
func (s *Store) CountUsers(ctx context.Context) (int, error) {
	var n int
	if err := s.db.GetContext(ctx, &n, `SELECT count(*) FROM users`); err != nil {
		return 0, fmt.Errorf("count users: %w", err)
	}
	return n, nil
}
