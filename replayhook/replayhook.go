// Package replayhook replays the letters of an HTTP source through the
// source's own replay endpoint: a signed POST carrying the letter, sent
// from the queue of source replays (store/operations) and tried again with
// backoff until the endpoint answers 2xx. The endpoint runs the task again
// in its own system, and may report how it went later
// (POST /api/v1/letters/{id}/outcome).
//
// The signature is the scheme Stripe and most webhook senders use: the
// header Redrive-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of
// "<t>.<body>" under the source's secret>. A receiver checks it with
// Verify, which refuses a signature older than its tolerance (a replayed
// request), and deduplicates on the body's replay_id, which a retried
// delivery repeats.
package replayhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/redrive/redrive/dlq"
)

// SignatureHeader is the header the signature travels in.
const SignatureHeader = "Redrive-Signature"

// MinSecretLen is the shortest secret a source may sign with, in bytes.
const MinSecretLen = 32

// Letters reads the letter a replay carries, whole and unmasked: the
// endpoint runs it with the arguments its own system sent (the store's
// letters room).
type Letters interface {
	GetDeadLetter(ctx context.Context, id int64) (dlq.DeadLetterDetail, error)
}

// Config is one HTTP source's replay endpoint.
type Config struct {
	// Source is the source's name; URL its replay endpoint; Secret the key
	// its requests are signed with.
	Source string
	URL    string
	Secret []byte
	// ConsoleURL, when set, is where the endpoint reports outcomes: the
	// body's outcome_url is built on it.
	ConsoleURL string
	Letters    Letters
	// Client sends the requests; default one with a 10 s timeout.
	Client *http.Client
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Sender posts the replays of one HTTP source to its endpoint (a
// dlq.ReplaySender).
type Sender struct{ cfg Config }

// New returns the sender of cfg's source.
func New(cfg Config) (*Sender, error) {
	if len(cfg.Secret) < MinSecretLen {
		return nil, fmt.Errorf("source %s: its replay secret has %d bytes; sign with at least %d", cfg.Source, len(cfg.Secret), MinSecretLen)
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Sender{cfg: cfg}, nil
}

// Replay is the body of a replay request: the replay's identity, the
// letter's identity in its source, and what the task needs to run again.
type Replay struct {
	// ReplayID is the same for every delivery of one replay: the
	// receiver's key for running it once.
	ReplayID     int64           `json:"replay_id"`
	DeadLetterID int64           `json:"dead_letter_id"`
	OperationID  *int64          `json:"operation_id"`
	Source       string          `json:"source"`
	ExternalID   string          `json:"external_id"`
	Task         string          `json:"task"`
	Queue        string          `json:"queue"`
	Args         json.RawMessage `json:"args"`
	Kwargs       json.RawMessage `json:"kwargs"`
	Attempts     int             `json:"attempts"`
	MaxAttempts  int             `json:"max_attempts"`
	ErrorClass   string          `json:"error_class"`
	Error        string          `json:"error"`
	FailedAt     time.Time       `json:"failed_at"`
	// OutcomeURL is where to report how the replay went, when the console
	// knows its own address.
	OutcomeURL string `json:"outcome_url,omitempty"`
}

// maxAnswer is how much of the endpoint's answer is kept.
const maxAnswer = 1 << 10

// SendReplay posts r's letter to the endpoint, signed. A 2xx answer is
// sent (a numeric job_id in a JSON answer names the job it runs as); 409
// and 422 are the endpoint refusing it for good (an EConflict error,
// quoting its answer), and the letter is pending again; anything else is
// an error tried again later.
func (s *Sender) SendReplay(ctx context.Context, r dlq.SourceReplay) (dlq.SentReplay, error) {
	l, err := s.cfg.Letters.GetDeadLetter(ctx, r.DeadLetterID)
	if err != nil {
		return dlq.SentReplay{}, fmt.Errorf("replay %d: %w", r.ID, err)
	}
	body, err := json.Marshal(Replay{ReplayID: r.ID, DeadLetterID: l.ID, OperationID: r.OperationID, Source: r.Source,
		ExternalID: r.ExternalID, Task: l.Task, Queue: l.Queue, Args: l.Args, Kwargs: l.Kwargs, Attempts: l.Attempts,
		MaxAttempts: l.MaxAttempts, ErrorClass: l.ErrorClass, Error: l.ErrorMessage, FailedAt: l.FailedAt,
		OutcomeURL: s.outcomeURL(l.ID)})
	if err != nil {
		return dlq.SentReplay{}, fmt.Errorf("replay %d: %w", r.ID, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return dlq.SentReplay{}, fmt.Errorf("replay %d: %w", r.ID, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Redrive replay")
	req.Header.Set("Redrive-Replay-Id", strconv.FormatInt(r.ID, 10))
	req.Header.Set(SignatureHeader, Sign(s.cfg.Secret, s.cfg.Now(), body))
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		return dlq.SentReplay{}, fmt.Errorf("post to %s's replay endpoint: %w", s.cfg.Source, stripURL(err))
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	answer := fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(dlq.ClipRunes(string(raw), maxAnswer)))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return dlq.SentReplay{JobID: jobIDIn(raw), Answer: answer}, nil
	case resp.StatusCode == http.StatusConflict || resp.StatusCode == http.StatusUnprocessableEntity:
		return dlq.SentReplay{}, dlq.Errorf(dlq.EConflict, "%s's replay endpoint refused it: %s", s.cfg.Source, answer)
	}
	return dlq.SentReplay{}, fmt.Errorf("%s's replay endpoint answered %s", s.cfg.Source, answer)
}

func (s *Sender) outcomeURL(letter int64) string {
	if s.cfg.ConsoleURL == "" {
		return ""
	}
	return strings.TrimRight(s.cfg.ConsoleURL, "/") + fmt.Sprintf("/api/v1/letters/%d/outcome", letter)
}

// jobIDIn reads a numeric job_id from a JSON answer, 0 when there is none.
func jobIDIn(answer []byte) int64 {
	var a struct {
		JobID json.Number `json:"job_id"`
	}
	if json.Unmarshal(answer, &a) != nil {
		return 0
	}
	id, err := a.JobID.Int64()
	if err != nil || id < 1 {
		return 0
	}
	return id
}

// stripURL drops the URL from a client error: a replay endpoint's URL may
// carry a token, and the error is shown on the operation page.
func stripURL(err error) error {
	var uerr interface{ Unwrap() error }
	if errors.As(err, &uerr) {
		if inner := uerr.Unwrap(); inner != nil {
			return inner
		}
	}
	return err
}

// Sign is the Redrive-Signature header of body sent at t.
func Sign(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

func mac(secret []byte, ts string, body []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(ts))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// ErrBadSignature is Verify's answer to a request not signed with the
// secret, or signed too long ago.
var ErrBadSignature = errors.New("replayhook: bad signature")

// Verify checks a Redrive-Signature header against body: signed with
// secret, at most tolerance before now (and not more than that after, for
// clocks apart). Any of several v1 values may match, so that a secret can
// be rotated.
func Verify(secret []byte, header string, body []byte, now time.Time, tolerance time.Duration) error {
	var ts string
	var sigs [][]byte
	for part := range strings.SplitSeq(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			if b, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, b)
			}
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return fmt.Errorf("%w: the header has no t= and v1=", ErrBadSignature)
	}
	if age := now.Sub(time.Unix(sec, 0)); age > tolerance || age < -tolerance {
		return fmt.Errorf("%w: signed %s ago, more than %s", ErrBadSignature, age.Round(time.Second), tolerance)
	}
	want := mac(secret, ts, body)
	for _, sig := range sigs {
		if hmac.Equal(sig, want) {
			return nil
		}
	}
	return fmt.Errorf("%w: no signature matches", ErrBadSignature)
}
