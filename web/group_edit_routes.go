package web

import (
	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/handlers"
	"github.com/redrive/redrive/reads"
	"github.com/redrive/redrive/store/groups"
)

// groupEditRoutes mounts an operator's changes to error groups (issue 27):
// merging groups that are one failure, and splitting a group's template
// where it joined two. They are POSTs, so the access rules require the
// operator role and a CSRF token (or a bearer token); the handlers check
// the role again. The page reads through the masking store, the changes go
// to the store itself.
func groupEditRoutes(e *echo.Echo, cfg Config, store *reads.Masked, editor *groups.Store) {
	e.GET("/groups/:fingerprint/edit", handlers.GroupEditPage(store, cfg.Version))
	e.POST("/groups/:fingerprint/merge", handlers.GroupMergeForm(editor, store, cfg.Version))
	e.POST("/groups/:fingerprint/split", handlers.GroupSplitForm(editor, store, cfg.Version))
	e.POST("/groups/:fingerprint/unmerge", handlers.GroupUnmergeForm(editor, store, cfg.Version))
	e.POST("/api/v1/groups/:fingerprint/merge", handlers.APIGroupMerge(editor))
	e.POST("/api/v1/groups/:fingerprint/split", handlers.APIGroupSplit(editor))
	e.POST("/api/v1/groups/:fingerprint/unmerge", handlers.APIGroupUnmerge(editor))
}
