package dlq

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"time"

	"github.com/lib/pq"
)

// TokenPrefix starts every API token, so one pasted into the wrong place
// (a log, a chat, a repository) is recognisable by secret scanners.
const TokenPrefix = "rdv_"

// Token is an API token as listed: never the token itself, which is shown
// once when it is created and stored only as a hash.
type Token struct {
	ID         int64      `db:"id" json:"id"`
	UserID     int64      `db:"user_id" json:"user_id"`
	UserName   string     `db:"user_name" json:"user"`
	Label      string     `db:"label" json:"label"`
	CreatedBy  string     `db:"created_by" json:"created_by"`
	CreatedAt  time.Time  `db:"created_at" json:"created_at"`
	LastUsedAt *time.Time `db:"last_used_at" json:"last_used_at"`
	RevokedAt  *time.Time `db:"revoked_at" json:"revoked_at"`
	// Sources, when set, limits the token to sending the letters of these
	// sources (POST /api/v1/letters), and nothing else.
	Sources pq.StringArray `db:"sources" json:"sources,omitempty"`
}

// NewTokenSecret returns a fresh token: 256 random bits, URL-safe.
func NewTokenSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("token: %w", err)
	}
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// HashToken is what is stored of a token and looked up by. SHA-256 and not
// bcrypt: a token is 256 random bits, so there is no dictionary to slow
// down, and every API request looks one up.
func HashToken(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}

// NewToken asks for a token for a user.
type NewToken struct {
	UserName string
	Label    string // default: the user's name and the time
	// Sources limits the token to sending the letters of these sources;
	// none: an ordinary token of its user's role.
	Sources []string
	Hash    []byte
	Actor   Actor
	Now     time.Time
}
