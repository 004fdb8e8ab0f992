package dlq

// GroupVariablesSample is how many of a group's newest letters
// GroupVariables reads: enough that the common values of an incident
// stand out, few enough that a group of millions answers as fast as one of
// ten.
const GroupVariablesSample = 2000

// GroupVariables is what varies between the letters of an error group:
// its template and, for each variable of it, which values the group's
// newest letters gave it. What it shows of the values is masked as the
// letter page masks the messages they come from.
type GroupVariables struct {
	// Tokens is the group's learned template (grouping.Template.Tokens);
	// nil when none is kept for the group (its letters were grouped before
	// templates were learned, or the template was deleted).
	Tokens []string
	// Parts is the template as it reads: constant text, and each
	// variable (Var, an index into Variables) in its place.
	Parts []TemplatePart
	// Span: a variable may take several words, or none.
	Span bool
	// Variables has one entry per variable of the template, in order.
	Variables []GroupVariable
	// Read is how many letters were read: the group's newest, at most
	// GroupVariablesSample. Fit is how many of them fit the template and
	// gave the values counted; a letter filed before an operator split the
	// group, say, may not.
	Read int
	Fit  int
}

// TemplatePart is a piece of a group's template: constant text, or the
// variable Var (an index into GroupVariables.Variables; -1 for text).
type TemplatePart struct {
	Text string
	Var  int
}

// GroupVariable is one variable of a group's template and the values it
// took.
type GroupVariable struct {
	// At is the variable's position in the template's tokens.
	At int
	// Distinct is how many different values the letters read gave it,
	// counted on the real values, so that secrets the page hides still
	// count each as itself.
	Distinct int
	// Top are its most common values as shown (masked), most common first,
	// at most groupTopValues of them.
	Top []ValueCount
	// Prefix is the start every value shares, of at least two characters,
	// when there are several values: "pi_", "payments-". It says what
	// kind of id varies when every value is another.
	Prefix string
}

// ValueCount is one value of a variable and how many letters gave it.
type ValueCount struct {
	// Value is as the letter page would show it: a value that masking
	// touched holds mask.Placeholder.
	Value string
	N     int
	// Hidden: masking touched the value, so it cannot be searched for.
	Hidden bool
}

// GroupMinutes is how many minutes a group's page charts minute by minute:
// an outage that began in the last hours shows when it began, which an
// hourly bar hides.
const GroupMinutes = 180
