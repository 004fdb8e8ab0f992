package dlq

// Role is what a signed-in person may do in the console.
type Role string

// The roles, each allowed everything the one before it is.
const (
	// RoleViewer reads everything.
	RoleViewer Role = "viewer"
	// RoleOperator also replays, edits and replays, discards and restores.
	RoleOperator Role = "operator"
	// RoleAdmin also manages users and API tokens.
	RoleAdmin Role = "admin"
)

// Roles lists every role from least to most allowed.
var Roles = []Role{RoleViewer, RoleOperator, RoleAdmin}

// Valid reports whether r is a known role.
func (r Role) Valid() bool {
	return r == RoleViewer || r == RoleOperator || r == RoleAdmin
}

// CanAct reports whether r may change dead letters.
func (r Role) CanAct() bool { return r == RoleOperator || r == RoleAdmin }

// CanAdminister reports whether r may manage users and tokens.
func (r Role) CanAdminister() bool { return r == RoleAdmin }
