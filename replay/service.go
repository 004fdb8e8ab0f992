package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/redrive/redrive/dlq"
)

// ErrForbidden means the actor's role may not take the action. It is
// dlq's, so that a dlq.Error coded dlq.EForbidden matches it.
var ErrForbidden = dlq.ErrForbidden

// EditError is an edited argument that is not valid JSON of the right
// shape. Nothing was changed. (HTTP 422: the request was well-formed, its
// content was not.)
type EditError struct {
	Field   string // "args" or "kwargs"
	Message string
}

func (e *EditError) Error() string { return e.Field + ": " + e.Message }

// As finds an EditError as a dlq.Error coded dlq.EInvalidEdit.
func (e *EditError) As(target any) bool {
	return setError(target, &dlq.Error{Code: dlq.EInvalidEdit, Message: e.Error(),
		Fields: map[string]string{e.Field: e.Message}})
}

// ConfirmError means a large bulk action was not confirmed by typing its size.
type ConfirmError struct {
	Expected int64
	// Things is what is counted: "letters" unless set ("jobs").
	Things string
}

func (e *ConfirmError) Error() string {
	things := e.Things
	if things == "" {
		things = "letters"
	}
	return fmt.Sprintf("this acts on %d %s: type the number %d to confirm", e.Expected, things, e.Expected)
}

// As finds a ConfirmError as a dlq.Error coded dlq.EConfirmationRequired.
func (e *ConfirmError) As(target any) bool {
	return setError(target, &dlq.Error{Code: dlq.EConfirmationRequired, Message: e.Error(),
		Fields: map[string]string{"typed": e.Error()}})
}

// setError is the As method of the typed errors: errors.As(err, &e) with e
// a *dlq.Error finds them as the coded error they are.
func setError(target any, e *dlq.Error) bool {
	t, ok := target.(**dlq.Error)
	if ok {
		*t = e
	}
	return ok
}

// TypedConfirmationOver is the size above which a bulk action in the
// console must be confirmed by typing the number of letters.
const TypedConfirmationOver = 1000

// Actor is who asks for an action, with the role that decides if they may.
type Actor struct {
	dlq.Actor
	Role dlq.Role
}

// Store is what the service needs from the store's operations room.
type Store interface {
	ReplayDeadLetter(ctx context.Context, p dlq.ReplayParams) (dlq.ReplayResult, error)
	TestRunDeadLetter(ctx context.Context, p dlq.TestRunParams) (dlq.TestRunResult, error)
	DiscardDeadLetter(ctx context.Context, p dlq.DiscardParams) (int64, error)
	RestoreDeadLetter(ctx context.Context, p dlq.RestoreParams) (int64, error)
	PreviewSelection(ctx context.Context, sel dlq.Selection, sampleSize int) (dlq.Preview, error)
	SelectionOverlaps(ctx context.Context, sel dlq.Selection) ([]dlq.Overlap, error)
	CreateOperation(ctx context.Context, p dlq.OperationParams) (dlq.Operation, error)
	Operation(ctx context.Context, id int64) (dlq.Operation, error)
	CancelOperation(ctx context.Context, p dlq.ChangeOperationParams) (dlq.Operation, error)
	ReleaseCanary(ctx context.Context, p dlq.ChangeOperationParams) (dlq.Operation, error)
	ResumeOperation(ctx context.Context, p dlq.ChangeOperationParams) (dlq.Operation, error)
	StopFollowing(ctx context.Context, p dlq.ChangeOperationParams) (dlq.Operation, error)
}

// Workers lists the live workers and the builds they run (the queue's
// room), for the warning that a replay would run on the build the letters
// failed on.
type Workers interface {
	Workers(ctx context.Context) ([]dlq.WorkerInfo, error)
}

// Service applies policy to actions on dead letters and hands the guarded
// changes to the store.
type Service struct {
	store   Store
	workers Workers
	logger  *slog.Logger
	now     func() time.Time
	// wake, when set, tells the operation runner new work has arrived.
	wake func()
}

// Config configures a Service.
type Config struct {
	Store   Store
	Workers Workers
	Logger  *slog.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Wake is called after a bulk operation is created (Runner.Wake).
	Wake func()
}

// NewService returns a Service.
func NewService(cfg Config) *Service {
	s := &Service{store: cfg.Store, workers: cfg.Workers, logger: cfg.Logger, now: cfg.Now, wake: cfg.Wake}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.wake == nil {
		s.wake = func() {}
	}
	return s
}

func mayAct(a Actor) error {
	if !a.Role.CanAct() {
		return dlq.Errorf(dlq.EForbidden, "You may not do this: the %s role may not change dead letters", a.Role)
	}
	return nil
}

// ReplayRequest asks to replay one letter, optionally with edited arguments.
type ReplayRequest struct {
	ID     int64
	Actor  Actor
	Args   *string // edited args as typed, or nil to keep the letter's
	Kwargs *string // edited kwargs as typed, or nil to keep the letter's
	// Target sends the replay to another queue, from a start time, with a
	// new maximum of attempts (zero: as the letter ran, now).
	Target dlq.ReplayTarget
	Reason string
	Key    string
}

// Replay replays one letter. Edited arguments are validated before anything
// happens: invalid JSON or the wrong shape is an *EditError.
func (s *Service) Replay(ctx context.Context, r ReplayRequest) (dlq.ReplayResult, error) {
	if err := mayAct(r.Actor); err != nil {
		return dlq.ReplayResult{}, err
	}
	if err := checkReason(r.Reason); err != nil {
		return dlq.ReplayResult{}, err
	}
	p := dlq.ReplayParams{ID: r.ID, Actor: r.Actor.Actor, Reason: strings.TrimSpace(r.Reason), Target: r.Target, Now: s.now(), Key: r.Key}
	var err error
	if p.Args, err = parseEdit("args", r.Args, '['); err != nil {
		return dlq.ReplayResult{}, err
	}
	if p.Kwargs, err = parseEdit("kwargs", r.Kwargs, '{'); err != nil {
		return dlq.ReplayResult{}, err
	}
	res, err := s.store.ReplayDeadLetter(ctx, p)
	if err != nil {
		return dlq.ReplayResult{}, err
	}
	if !res.Repeated {
		s.logger.Info("replayed dead letter", "dead_letter_id", r.ID, "job_id", res.JobID, "actor", r.Actor.Name)
	}
	return res, nil
}

// parseEdit validates an edited JSON value: nil means unchanged.
func parseEdit(field string, text *string, open byte) (json.RawMessage, error) {
	if text == nil {
		return nil, nil
	}
	raw := bytes.TrimSpace([]byte(*text))
	if len(raw) == 0 {
		return nil, &EditError{Field: field, Message: "is empty; write [] or {} for none"}
	}
	// Into a RawMessage: only the syntax is checked, so a number Go's
	// float64 cannot hold (1e999) is kept as written, as jsonb keeps it.
	var v json.RawMessage
	if err := json.Unmarshal(raw, &v); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			line, col := position(raw, syn.Offset)
			return nil, &EditError{Field: field, Message: fmt.Sprintf("invalid JSON at line %d, column %d: %v", line, col, err)}
		}
		return nil, &EditError{Field: field, Message: "invalid JSON: " + err.Error()}
	}
	if raw[0] != open {
		want := "an array [...]"
		if open == '{' {
			want = "an object {...}"
		}
		return nil, &EditError{Field: field, Message: "must be " + want}
	}
	compact := new(bytes.Buffer)
	if err := json.Compact(compact, raw); err != nil {
		return nil, &EditError{Field: field, Message: "invalid JSON: " + err.Error()}
	}
	return compact.Bytes(), nil
}

// position turns a byte offset into a 1-based line and column.
func position(b []byte, offset int64) (line, col int) {
	line, col = 1, 1
	for i := int64(0); i < offset-1 && i < int64(len(b)); i++ {
		if b[i] == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}

// DiscardRequest asks to discard one letter.
type DiscardRequest struct {
	ID     int64
	Actor  Actor
	Reason string // required
	Key    string
	// DeleteInSource also deletes the letter's job in its source (a River
	// job), which otherwise keeps it.
	DeleteInSource bool
}

// Discard discards one letter; a reason is required.
func (s *Service) Discard(ctx context.Context, r DiscardRequest) (int64, error) {
	if err := mayAct(r.Actor); err != nil {
		return 0, err
	}
	if err := checkReason(r.Reason); err != nil {
		return 0, err
	}
	return s.store.DiscardDeadLetter(ctx, dlq.DiscardParams{ID: r.ID, Actor: r.Actor.Actor, Reason: strings.TrimSpace(r.Reason),
		Now: s.now(), Key: r.Key, DeleteInSource: r.DeleteInSource})
}

// Restore makes a discarded letter pending again.
func (s *Service) Restore(ctx context.Context, id int64, a Actor, reason, key string) (int64, error) {
	if err := mayAct(a); err != nil {
		return 0, err
	}
	if err := checkReason(reason); err != nil {
		return 0, err
	}
	return s.store.RestoreDeadLetter(ctx, dlq.RestoreParams{ID: id, Actor: a.Actor, Reason: strings.TrimSpace(reason), Now: s.now(), Key: key})
}

// MaxReasonLength bounds the reason given for an action, in characters:
// the form's own limit. A reason is shown on the letter's page and in every
// audit listing, so one the size of a log file would make both unusable.
const MaxReasonLength = 1000

func checkReason(reason string) error {
	if n := utf8.RuneCountInString(strings.TrimSpace(reason)); n > MaxReasonLength {
		return &dlq.ValidationError{Fields: map[string]string{
			"reason": fmt.Sprintf("is %d characters long; at most %d", n, MaxReasonLength)}}
	}
	return nil
}

// VersionWarning returns a warning when the letter failed on a worker build
// that live workers still run: a replay will likely fail the same way.
func (s *Service) VersionWarning(ctx context.Context, l dlq.DeadLetter, staleAfter time.Duration) (string, error) {
	v, err := s.liveBuild(ctx, []dlq.DeadLetter{l}, staleAfter)
	if err != nil || v == "" {
		return "", err
	}
	return fmt.Sprintf("This failed on %s and live workers still run %s: unless the fix is elsewhere, a replay will likely fail the same way.", v, v), nil
}

// SelectionVersionWarning is VersionWarning for a bulk replay, judged by
// the selection's newest letters (its preview's sample): the build they
// failed on is the one a fix would have replaced. Older letters failed on
// older builds whatever was fixed since, so they say nothing.
func (s *Service) SelectionVersionWarning(ctx context.Context, newest []dlq.DeadLetter, staleAfter time.Duration) (string, error) {
	v, err := s.liveBuild(ctx, newest, staleAfter)
	if err != nil || v == "" {
		return "", err
	}
	return fmt.Sprintf("The newest of these letters failed on %s and live workers still run %s: unless the fix is elsewhere, a replay will likely fail the same way.", v, v), nil
}

// liveBuild returns the first build (in the order of letters) that one of
// letters failed on and that a worker still runs whose last heartbeat is
// more recent than staleAfter; "" when there is none.
func (s *Service) liveBuild(ctx context.Context, letters []dlq.DeadLetter, staleAfter time.Duration) (string, error) {
	if !slices.ContainsFunc(letters, func(l dlq.DeadLetter) bool { return l.WorkerVersion != "" }) {
		return "", nil // nothing to compare: no need to read the workers
	}
	workers, err := s.workers.Workers(ctx)
	if err != nil {
		return "", err
	}
	now := s.now()
	live := map[string]bool{}
	for _, w := range workers {
		if now.Sub(w.HeartbeatAt) < staleAfter {
			live[w.Version] = true
		}
	}
	for _, l := range letters {
		if l.WorkerVersion != "" && live[l.WorkerVersion] {
			return l.WorkerVersion, nil
		}
	}
	return "", nil
}
