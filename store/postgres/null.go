package postgres

// Nullable returns nil for "", so that an empty text is stored as NULL,
// and a pointer to s otherwise.
func Nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
