package dlq

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

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

// NewUser asks for a user to be created.
type NewUser struct {
	Name         string
	Role         Role
	PasswordHash []byte
	Actor        Actor
	Now          time.Time
}

// Validate reports what is wrong with the new user, field by field.
func (p NewUser) Validate() error {
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

// UserChange is who changes a user, and when.
type UserChange struct {
	Actor Actor
	Now   time.Time
}
