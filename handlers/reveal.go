package handlers

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/reads"
)

// ArgsRevealer writes the audit entry that precedes showing a letter's
// real arguments.
type ArgsRevealer interface {
	RevealArgs(ctx context.Context, id int64, a dlq.Actor, now time.Time) error
}

// RevealArgs shows one letter's real argument values to an operator: it
// writes the reveal to the audit trail first, then lets show (the letter's
// page, or its API answer) read this one letter unmasked. A viewer is
// refused, whatever the page showed. The answer is never cached.
func RevealArgs(store ArgsRevealer, now func() time.Time, show echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		a := ActorFrom(c)
		if !a.Role.CanAct() {
			return &dlq.Error{Code: "forbidden",
				Message: "Only operators and admins may reveal hidden argument values."}
		}
		id, err := parseLetterID(c)
		if err != nil {
			return err
		}
		if err := store.RevealArgs(c.Request().Context(), id, a.Actor, now()); err != nil {
			return err
		}
		r := c.Request()
		c.SetRequest(r.WithContext(reads.WithRevealed(r.Context(), id)))
		c.Response().Header().Set("Cache-Control", "no-store")
		return show(c)
	}
}

// RevealedArgsJSON is the API's answer to a reveal.
type RevealedArgsJSON struct {
	ID     int64           `json:"id"`
	Args   json.RawMessage `json:"args"`
	Kwargs json.RawMessage `json:"kwargs"`
}

// APIRevealedArgs answers POST /api/v1/dead-letters/{id}/reveal (behind
// RevealArgs) with the letter's real arguments.
func APIRevealedArgs(store DeadLetterGetter) echo.HandlerFunc {
	return func(c echo.Context) error {
		d, err := getLetter(c.Request().Context(), store, c.Param("id"))
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, RevealedArgsJSON{ID: d.ID, Args: d.Args, Kwargs: d.Kwargs})
	}
}
