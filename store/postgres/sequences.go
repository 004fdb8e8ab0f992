package postgres

// JobsSequenceSQL and LettersSequenceSQL name the identity sequences of
// jobs and dead_letter_records for nextval. Each is a subquery, so
// Postgres looks the sequence up once per statement (an InitPlan):
// written as nextval(pg_get_serial_sequence(...)::regclass), or as a
// column of a joined subquery, which the planner pulls up, the lookup ran
// once per id drawn, and 100,000 ids took 260 ms instead of 50.
const (
	JobsSequenceSQL    = `(SELECT pg_get_serial_sequence('jobs', 'id')::regclass)`
	LettersSequenceSQL = `(SELECT pg_get_serial_sequence('dead_letter_records', 'id')::regclass)`
)
