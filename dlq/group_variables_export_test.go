package dlq

// The queries of a group's page, for the tests that read their plans.
const (
	GroupVariableLettersSQL = groupVariableLettersSQL
	GroupMinutelySQL        = groupMinutelySQL
)
