package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Client is a typed client of a console's JSON API (/api/v1, described
// by /api/v1/openapi.json), authenticated with an API token.
type Client struct {
	base  *url.URL
	token string
	http  *http.Client
}

// NewClient returns a client of the console at baseURL (http or https,
// with or without a path prefix) that sends token as a bearer token.
func NewClient(baseURL, token string, hc *http.Client) (*Client, error) {
	u, err := url.Parse(strings.TrimSpace(baseURL))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("the console's URL must look like https://redrive.example.com, not %q", baseURL)
	}
	if token == "" {
		return nil, errors.New("no API token: set REDRIVE_TOKEN (an admin creates one with: redrive token create --user NAME)")
	}
	if hc == nil {
		hc = &http.Client{Timeout: 60 * time.Second}
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	return &Client{base: u, token: token, http: hc}, nil
}

// APIError is an error answer of the API, in its own words.
type APIError struct {
	Status  int
	Code    string
	Message string
	Fields  map[string]string
	// ReplayJobID names the job a letter was already replayed as (409).
	ReplayJobID *int64
}

func (e *APIError) Error() string {
	var b strings.Builder
	b.WriteString(e.Message)
	keys := make([]string, 0, len(e.Fields))
	for k := range e.Fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		// The message of a validation error already lists its fields.
		if line := k + ": " + e.Fields[k]; !strings.Contains(e.Message, line) {
			b.WriteString("\n  " + line)
		}
	}
	if e.ReplayJobID != nil {
		fmt.Fprintf(&b, " (replayed as job %d)", *e.ReplayJobID)
	}
	fmt.Fprintf(&b, " [%s, HTTP %d]", e.Code, e.Status)
	return b.String()
}

type errorBody struct {
	Error *struct {
		Code    string            `json:"code"`
		Message string            `json:"message"`
		Fields  map[string]string `json:"fields"`
	} `json:"error"`
	ReplayJobID *int64 `json:"replay_job_id"`
}

// do sends one request and decodes a 2xx answer into out; it returns the
// status, or an *APIError for an error answer.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, body, out any) (int, error) {
	u := *c.base
	u.Path += path
	u.RawQuery = query.Encode()
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return 0, fmt.Errorf("encode request: %w", err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		// url.Error repeats the whole URL; name the console once.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return 0, fmt.Errorf("cannot reach the console at %s: %w", c.base.Redacted(), err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		var eb errorBody
		if json.Unmarshal(raw, &eb) == nil && eb.Error != nil {
			return resp.StatusCode, &APIError{Status: resp.StatusCode, Code: eb.Error.Code, Message: eb.Error.Message,
				Fields: eb.Error.Fields, ReplayJobID: eb.ReplayJobID}
		}
		// Not the API speaking (a proxy, a wrong URL): say what came back.
		return resp.StatusCode, &APIError{Status: resp.StatusCode, Code: "not_api",
			Message: fmt.Sprintf("%s %s answered %s, not the console's API (is REDRIVE_URL right?): %.200s",
				method, u.Redacted(), resp.Status, strings.TrimSpace(string(raw)))}
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: the answer is not the API's JSON (is REDRIVE_URL right?): %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

// ListLetters reads one page of dead letters; q holds the list's filters.
func (c *Client) ListLetters(ctx context.Context, q url.Values) (LetterPage, error) {
	var p LetterPage
	_, err := c.do(ctx, http.MethodGet, "/api/v1/dead-letters", q, nil, &p)
	return p, err
}

// Letter reads one dead letter with its history.
func (c *Client) Letter(ctx context.Context, id int64) (LetterDetail, error) {
	var d LetterDetail
	_, err := c.do(ctx, http.MethodGet, "/api/v1/dead-letters/"+strconv.FormatInt(id, 10), nil, nil, &d)
	return d, err
}

// Groups reads the top error groups; q holds task, sort and limit.
func (c *Client) Groups(ctx context.Context, q url.Values) ([]Group, error) {
	var out struct {
		Items []Group `json:"items"`
	}
	_, err := c.do(ctx, http.MethodGet, "/api/v1/groups", q, nil, &out)
	return out.Items, err
}

// Sources lists where letters come from.
func (c *Client) Sources(ctx context.Context) ([]Source, error) {
	var out struct {
		Sources []Source `json:"sources"`
	}
	_, err := c.do(ctx, http.MethodGet, "/api/v1/sources", nil, nil, &out)
	return out.Sources, err
}

// Bulk starts a bulk replay or discard ("replay", "discard").
func (c *Client) Bulk(ctx context.Context, kind string, r BulkRequest) (Operation, error) {
	var op Operation
	_, err := c.do(ctx, http.MethodPost, "/api/v1/dead-letters/"+kind, nil, r, &op)
	return op, err
}

// Operations lists bulk operations, newest first; q holds state and limit.
func (c *Client) Operations(ctx context.Context, q url.Values) ([]Operation, error) {
	var out struct {
		Items []Operation `json:"items"`
	}
	_, err := c.do(ctx, http.MethodGet, "/api/v1/operations", q, nil, &out)
	return out.Items, err
}

// Operation reads one operation, with its canary's jobs.
func (c *Client) Operation(ctx context.Context, id int64) (Operation, error) {
	var op Operation
	_, err := c.do(ctx, http.MethodGet, "/api/v1/operations/"+strconv.FormatInt(id, 10), nil, nil, &op)
	return op, err
}

// ChangeOperation cancels ("cancel"), releases ("release"), resumes
// ("resume") or stops following ("stop-following") an operation.
func (c *Client) ChangeOperation(ctx context.Context, id int64, change string) (Operation, error) {
	var op Operation
	_, err := c.do(ctx, http.MethodPost, "/api/v1/operations/"+strconv.FormatInt(id, 10)+"/"+change, nil, struct{}{}, &op)
	return op, err
}
