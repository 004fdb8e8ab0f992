package e2e

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/web/webtest"
)

// signIn signs page in to the console at base as a user named after role,
// creating the user in db first if needed (a test may open several pages
// on one database).
func signIn(t *testing.T, page playwright.Page, base string, db *storetest.DB, role dlq.Role) {
	t.Helper()
	ensureUser(t, db, string(role), role)
	signInAs(t, page, base, string(role), webtest.Password)
}

func ensureUser(t *testing.T, db *storetest.DB, name string, role dlq.Role) {
	t.Helper()
	store := storetest.NewStores(db.DB)
	if _, err := store.Access.UserByName(context.Background(), name); err == nil {
		return
	} else if !errors.Is(err, dlq.ErrNotFound) {
		t.Fatal(err)
	}
	hash, err := dlq.HashPassword(name, webtest.Password, 4)
	must(t, err)
	_, err = store.Access.CreateUser(context.Background(), dlq.NewUser{Name: name, Role: role, PasswordHash: hash,
		Actor: dlq.Actor{Name: "e2e"}, Now: time.Now()})
	if err != nil && !errors.Is(err, dlq.ErrConflict) {
		t.Fatal(err)
	}
}

// signInAs fills in the sign-in form as a person would.
func signInAs(t *testing.T, page playwright.Page, base, name, password string) {
	t.Helper()
	_, err := page.Goto(base + "/login")
	must(t, err)
	must(t, page.GetByLabel("Username").Fill(name))
	must(t, page.GetByLabel("Password").Fill(password))
	must(t, page.GetByRole("button", playwright.PageGetByRoleOptions{Name: "Sign in"}).Click())
	must(t, expect.Page(page).Not().ToHaveURL(regexp.MustCompile(`/login`)))
}

// TestSignInSeeYourNameSignOut: the console sends an anonymous visitor to
// the sign-in page and back to where they were going; a wrong password is
// refused in words; the signed-in user's name shows; signing out ends it;
// signing out everywhere ends the session in another browser too.
func TestSignInSeeYourNameSignOut(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	ensureUser(t, db, "ann", dlq.RoleOperator)
	base := startServer(t, db)
	page := newPage(t)

	_, err := page.Goto(base + "/dead-letters?status=all")
	must(t, err)
	must(t, expect.Page(page).ToHaveURL(regexp.MustCompile(`/login\?next=`)))
	must(t, page.GetByLabel("Username").Fill("ann"))
	must(t, page.GetByLabel("Password").Fill("not the password"))
	must(t, page.GetByRole("button", playwright.PageGetByRoleOptions{Name: "Sign in"}).Click())
	must(t, expect.Locator(page.Locator(`[data-testid="login-error"]`)).ToHaveText("Wrong username or password."))
	screenshot(t, page, "login-refused")

	must(t, page.GetByLabel("Password").Fill(webtest.Password))
	must(t, page.GetByRole("button", playwright.PageGetByRoleOptions{Name: "Sign in"}).Click())
	must(t, expect.Page(page).ToHaveURL(base+"/dead-letters?status=all"))
	must(t, expect.Locator(page.Locator(`[data-testid="current-user"]`)).ToHaveText("ann (operator)"))

	must(t, page.GetByRole("button", playwright.PageGetByRoleOptions{Name: "Sign out", Exact: playwright.Bool(true)}).Click())
	must(t, expect.Page(page).ToHaveURL(base+"/login"))
	_, err = page.Goto(base + "/")
	must(t, err)
	must(t, expect.Page(page).ToHaveURL(regexp.MustCompile(`/login`)))

	other := newPage(t)
	signInAs(t, page, base, "ann", webtest.Password)
	signInAs(t, other, base, "ann", webtest.Password)
	must(t, page.GetByTestId("sign-out-everywhere").Click())
	must(t, expect.Page(page).ToHaveURL(base+"/login"))
	_, err = other.Goto(base + "/workers")
	must(t, err)
	must(t, expect.Page(other).ToHaveURL(regexp.MustCompile(`/login`)))
}

// TestViewerSeesNoActionButtons: a viewer reads a letter but is offered
// neither the actions nor the reveal; an operator replays a letter whose
// masked card number is replayed as stored.
func TestViewerSeesNoActionButtonsOperatorReplays(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	id := storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Task: "billing.charge",
		Kwargs: `{"card_number":"4111111111111111","amount":12}`})
	must(t, storetest.NewStores(db.DB).Queue.RegisterTasks(context.Background(), []string{"billing.charge"}))
	base := startServer(t, db)
	letter := base + "/dead-letters/" + itoa(id)

	viewer := newPage(t)
	signIn(t, viewer, base, db, dlq.RoleViewer)
	_, err := viewer.Goto(letter)
	must(t, err)
	must(t, expect.Locator(viewer.Locator(`[data-testid="args-masked"]`)).ToBeVisible())
	must(t, expect.Locator(viewer.Locator(`#payload`)).Not().ToContainText("4111111111111111"))
	must(t, expect.Locator(viewer.Locator(`[data-testid="no-act-note"]`)).ToBeVisible())
	must(t, expect.Locator(viewer.Locator(`[data-testid="replay"], [data-testid="discard"], [data-testid="edit-replay"]`)).ToHaveCount(0))
	must(t, expect.Locator(viewer.Locator(`[data-testid="reveal-args"]`)).ToHaveCount(0))
	screenshot(t, viewer, "viewer-letter")

	op := newPage(t)
	signIn(t, op, base, db, dlq.RoleOperator)
	_, err = op.Goto(letter)
	must(t, err)
	must(t, op.Locator(`[data-testid="reveal-args"]`).Click())
	must(t, expect.Locator(op.Locator(`#payload`)).ToContainText("4111111111111111"))
	_, err = op.Goto(letter)
	must(t, err)
	must(t, op.Locator(`[data-testid="replay"]`).Click())
	must(t, expect.Locator(op.Locator(`[data-testid="action-result"]`)).ToBeVisible())
	screenshot(t, op, "operator-replayed")

	var kwargs string
	must(t, db.Get(&kwargs, `SELECT kwargs::text FROM jobs WHERE replay_of = $1`, id))
	if kwargs != `{"amount": 12, "card_number": "4111111111111111"}` {
		t.Errorf("the replayed job has kwargs %s, not the stored ones", kwargs)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
