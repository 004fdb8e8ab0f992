package dlq

// RebuildResult is what a regrouping did.
type RebuildResult struct {
	Letters int64 `json:"letters"`
	Groups  int   `json:"groups"`
	// Moved counts the letters whose group changed.
	Moved int64 `json:"moved"`
	// Merged counts the group ids that are gone and now redirect.
	Merged int `json:"merged"`
}
