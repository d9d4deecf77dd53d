package handlers

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"lifeline/services/audit"
	"lifeline/services/dbconn"
	"lifeline/views/i18n"
	"lifeline/views/pages"
)

// connectionService is what the database connections page and API need.
type connectionService interface {
	List(ctx context.Context, orgID string) ([]dbconn.Connection, error)
	Get(ctx context.Context, orgID, id string) (*dbconn.Connection, error)
	Create(ctx context.Context, orgID string, actor audit.Actor, in dbconn.Input) (*dbconn.Connection, error)
	Update(ctx context.Context, orgID, id string, actor audit.Actor, in dbconn.Input) (*dbconn.Connection, error)
	Delete(ctx context.Context, orgID, id string, actor audit.Actor) error
	Test(ctx context.Context, orgID, id string) (*dbconn.Connection, error)
}

var _ connectionService = (*dbconn.Service)(nil)

// ConnectionsHandler serves the admins' database connections (/settings/connections and
// /api/v1/connections): list, create, edit (an empty DSN keeps the stored one), delete and
// test. The DSN is never shown or returned: only masked. Another organization's id is a
// 404; field messages are 422.
type ConnectionsHandler struct {
	*chrome
	conns connectionService
	// Now is the clock of relative times ("3 minutes ago").
	Now func() time.Time
}

// newConnectionsHandler returns the handler.
func newConnectionsHandler(ch *chrome, conns connectionService) *ConnectionsHandler {
	return &ConnectionsHandler{chrome: ch, conns: conns, Now: time.Now}
}

// formInput reads the create and edit forms. A form without the key table field keeps the
// stored one; an empty field is the default.
func formInput(c echo.Context) dbconn.Input {
	in := dbconn.Input{Name: c.FormValue("name"), Driver: c.FormValue("driver"), DSN: c.FormValue("dsn"), Description: c.FormValue("description")}
	if form, err := c.FormParams(); err == nil && form.Has("keyTable") {
		k := form.Get("keyTable")
		in.KeyTable = &k
	}
	return in
}

// formOf is the form again after a 422 with its messages: what was sent (keyTable when the
// form had no key table), never the DSN.
func formOf(in dbconn.Input, keyTable string, fields map[string]string, msg string) pages.ConnectionForm {
	if in.KeyTable != nil {
		keyTable = *in.KeyTable
	}
	return pages.ConnectionForm{Name: in.Name, Driver: in.Driver, Description: in.Description, KeyTable: keyTable, Errors: fields,
		FormError: msg, Retype: in.DSN != ""}
}

// List renders the page; ?done= confirms a change, ?tested= marks the row just tested.
func (h *ConnectionsHandler) List(c echo.Context) error {
	vm := pages.ConnectionsVM{Form: pages.ConnectionForm{Driver: dbconn.Driver, KeyTable: dbconn.DefaultKeyTable}}
	switch done := c.QueryParam("done"); done {
	case "created", "updated", "deleted":
		vm.Done, vm.DoneName = done, c.QueryParam("name")
	}
	return h.renderList(c, http.StatusOK, vm, c.QueryParam("tested"))
}

// Create adds a connection from the form: 422 with the form's messages, or back to the list.
func (h *ConnectionsHandler) Create(c echo.Context) error {
	p, in := principal(c), formInput(c)
	conn, err := h.conns.Create(c.Request().Context(), p.OrganizationID, actorOf(p), in)
	if me := invalid(err); me != nil {
		return h.renderList(c, http.StatusUnprocessableEntity, pages.ConnectionsVM{Form: formOf(in, dbconn.DefaultKeyTable, me.Fields, me.Message)}, "")
	}
	if err != nil {
		return err
	}
	return redirect(c, h.url("connections")+"?done=created&name="+urlQueryEscape(conn.Name))
}

func (h *ConnectionsHandler) renderList(c echo.Context, status int, vm pages.ConnectionsVM, tested string) error {
	p, l := principal(c), localizer(c)
	cs, err := h.conns.List(c.Request().Context(), p.OrganizationID)
	if err != nil {
		return err
	}
	now := h.Now()
	for i := range cs {
		r := h.row(l, &cs[i], now)
		r.Tested = r.ID == tested
		r.Test.Live = r.Tested
		vm.Rows = append(vm.Rows, r)
	}
	vm.CSRF = csrfToken(c)
	vm.Form = h.form(l, vm.Form, h.url("connections.create"))
	return render(c, status, pages.Connections(h.page(c, "connections.title", "connections"), vm))
}

// form fills a form's action, driver choices and translated messages.
func (h *ConnectionsHandler) form(l *i18n.Localizer, f pages.ConnectionForm, action string) pages.ConnectionForm {
	f.Action = action
	if f.Driver == "" {
		f.Driver = dbconn.Driver
	}
	f.Drivers = options([]string{dbconn.Driver}, f.Driver, func(d string) string { return l.TOr("connections.driver."+d, d) })
	f.FormError, f.Errors = translated(l, f.FormError, f.Errors)
	if len(f.Errors) > 0 && f.FormError == "" {
		f.FormError = l.T("form.check")
	}
	return f
}

// row is a connection for the page.
func (h *ConnectionsHandler) row(l *i18n.Localizer, cn *dbconn.Connection, now time.Time) pages.ConnectionRow {
	return pages.ConnectionRow{ID: cn.ID, Name: cn.Name, Driver: cn.Driver, DSN: cn.MaskedDSN, Description: cn.Description, KeyTable: cn.KeyTable,
		Test: testResult(l, cn, now), EditURL: h.url("connection", cn.ID), DeleteURL: h.url("connection.delete", cn.ID),
		TestURL: h.url("connection.test", cn.ID)}
}

// testResult is a connection's last test for the page.
func testResult(l *i18n.Localizer, cn *dbconn.Connection, now time.Time) pages.ConnectionTest {
	t := pages.ConnectionTest{ConnectionID: cn.ID}
	if cn.LastTestedAt == nil {
		return t
	}
	t.Status, t.At, t.AtText, t.AtRelative = "ok", rfc(*cn.LastTestedAt), displayTime(l, *cn.LastTestedAt), l.Relative(*cn.LastTestedAt, now)
	if cn.LastTestError != "" {
		t.Status, t.Error = "failed", l.Text(cn.LastTestError)
	}
	return t
}

// Edit renders a connection's edit page.
func (h *ConnectionsHandler) Edit(c echo.Context) error {
	cn, err := h.get(c)
	if err != nil {
		return err
	}
	f := pages.ConnectionForm{Name: cn.Name, Driver: cn.Driver, Description: cn.Description, KeyTable: cn.KeyTable}
	return h.renderEdit(c, http.StatusOK, cn, f)
}

// Update saves the edit form (an empty DSN keeps the stored one): 422 with the form's
// messages, or back to the list.
func (h *ConnectionsHandler) Update(c echo.Context) error {
	cn, err := h.get(c)
	if err != nil {
		return err
	}
	p, in := principal(c), formInput(c)
	updated, err := h.conns.Update(c.Request().Context(), p.OrganizationID, cn.ID, actorOf(p), in)
	if me := invalid(err); me != nil {
		return h.renderEdit(c, http.StatusUnprocessableEntity, cn, formOf(in, cn.KeyTable, me.Fields, me.Message))
	}
	if err != nil {
		return err
	}
	return redirect(c, h.url("connections")+"?done=updated&name="+urlQueryEscape(updated.Name))
}

func (h *ConnectionsHandler) renderEdit(c echo.Context, status int, cn *dbconn.Connection, f pages.ConnectionForm) error {
	l := localizer(c)
	f.Edit, f.StoredDSN, f.CancelURL = true, cn.MaskedDSN, h.url("connections")
	vm := pages.ConnectionEditVM{Name: cn.Name, Form: h.form(l, f, h.url("connection.update", cn.ID)), BackURL: h.url("connections"),
		Row: h.row(l, cn, h.Now()), CSRF: csrfToken(c)}
	return render(c, status, pages.ConnectionEdit(h.page(c, l.T("connections.edit.title", "Name", cn.Name), "connections"), vm))
}

// Delete deletes a connection (after the form's confirmation) and goes back to the list.
func (h *ConnectionsHandler) Delete(c echo.Context) error {
	cn, err := h.get(c)
	if err != nil {
		return err
	}
	p := principal(c)
	if err := h.conns.Delete(c.Request().Context(), p.OrganizationID, cn.ID, actorOf(p)); err != nil {
		return err
	}
	return redirect(c, h.url("connections")+"?done=deleted&name="+urlQueryEscape(cn.Name))
}

// Test tests a connection: for htmx the result's fragment (success or the error: its
// SQLSTATE and condition name, or a fixed phrase; see dbconn.Error),
// otherwise back to the list with the row marked.
func (h *ConnectionsHandler) Test(c echo.Context) error {
	cn, err := h.test(c)
	if err != nil {
		return err
	}
	if isHTMX(c) {
		t := testResult(localizer(c), cn, h.Now())
		t.Live = true
		return render(c, http.StatusOK, pages.ConnectionTestResult(t))
	}
	return redirect(c, h.url("connections")+"?tested="+urlQueryEscape(cn.ID)+"#"+"connection-"+cn.ID)
}

// test runs the test of the request's connection: the connection as recorded, whether the
// test succeeded or failed (a failure is recorded on it, not an error of the request).
func (h *ConnectionsHandler) test(c echo.Context) (*dbconn.Connection, error) {
	id := c.Param("id")
	if err := checkID(id, "database connection"); err != nil {
		return nil, err
	}
	cn, err := h.conns.Test(c.Request().Context(), principal(c).OrganizationID, id)
	var failed *dbconn.Error
	if errors.As(err, &failed) && cn != nil {
		return cn, nil
	}
	return cn, err
}

// get loads the request's connection (ENOTFOUND for another organization's).
func (h *ConnectionsHandler) get(c echo.Context) (*dbconn.Connection, error) {
	id := c.Param("id")
	if err := checkID(id, "database connection"); err != nil {
		return nil, err
	}
	return h.conns.Get(c.Request().Context(), principal(c).OrganizationID, id)
}

// apiConnection is a connection in the API: the DSN masked.
type apiConnection struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Driver      string `json:"driver"`
	DSN         string `json:"dsn"`
	Description string `json:"description"`
	// KeyTable is where database_operation compensations record their idempotency keys,
	// in the connection's database.
	KeyTable      string  `json:"keyTable"`
	LastTestedAt  *string `json:"lastTestedAt"`
	LastTestError *string `json:"lastTestError"`
	CreatedAt     string  `json:"createdAt"`
	UpdatedAt     string  `json:"updatedAt"`
}

func apiConnectionOf(cn *dbconn.Connection) apiConnection {
	out := apiConnection{ID: cn.ID, Name: cn.Name, Driver: cn.Driver, DSN: cn.MaskedDSN, Description: cn.Description, KeyTable: cn.KeyTable,
		LastTestedAt: rfcPtr(cn.LastTestedAt), CreatedAt: rfc(cn.CreatedAt), UpdatedAt: rfc(cn.UpdatedAt)}
	if cn.LastTestError != "" {
		e := cn.LastTestError
		out.LastTestError = &e
	}
	return out
}

// apiConnectionInput is the body of POST and PUT; on PUT an empty or missing dsn keeps it,
// and a missing keyTable keeps it (an empty one is the default, lifeline_compensation_keys).
type apiConnectionInput struct {
	Name        string  `json:"name"`
	Driver      string  `json:"driver"`
	DSN         string  `json:"dsn"`
	Description string  `json:"description"`
	KeyTable    *string `json:"keyTable"`
}

func (in apiConnectionInput) input() dbconn.Input {
	return dbconn.Input{Name: in.Name, Driver: in.Driver, DSN: in.DSN, Description: in.Description, KeyTable: in.KeyTable}
}

// APIList: GET /api/v1/connections → {"items": […]} by name.
func (h *ConnectionsHandler) APIList(c echo.Context) error {
	cs, err := h.conns.List(c.Request().Context(), principal(c).OrganizationID)
	if err != nil {
		return err
	}
	items := make([]apiConnection, 0, len(cs))
	for i := range cs {
		items = append(items, apiConnectionOf(&cs[i]))
	}
	return c.JSON(http.StatusOK, map[string]any{"items": items})
}

// APIGet: GET /api/v1/connections/{id}.
func (h *ConnectionsHandler) APIGet(c echo.Context) error {
	cn, err := h.get(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, apiConnectionOf(cn))
}

// APICreate: POST /api/v1/connections with {"name", "driver", "dsn", "description",
// "keyTable"} → 201.
func (h *ConnectionsHandler) APICreate(c echo.Context) error {
	var in apiConnectionInput
	if err := decodeBody(c, &in); err != nil {
		return err
	}
	p := principal(c)
	cn, err := h.conns.Create(c.Request().Context(), p.OrganizationID, actorOf(p), in.input())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, apiConnectionOf(cn))
}

// APIUpdate: PUT /api/v1/connections/{id} with {"name", "driver", "dsn", "description",
// "keyTable"} (an empty dsn, or no keyTable, keeps the stored one) → 200.
func (h *ConnectionsHandler) APIUpdate(c echo.Context) error {
	id := c.Param("id")
	if err := checkID(id, "database connection"); err != nil {
		return err
	}
	var in apiConnectionInput
	if err := decodeBody(c, &in); err != nil {
		return err
	}
	p := principal(c)
	cn, err := h.conns.Update(c.Request().Context(), p.OrganizationID, id, actorOf(p), in.input())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, apiConnectionOf(cn))
}

// APIDelete: DELETE /api/v1/connections/{id} → 204.
func (h *ConnectionsHandler) APIDelete(c echo.Context) error {
	id := c.Param("id")
	if err := checkID(id, "database connection"); err != nil {
		return err
	}
	p := principal(c)
	if err := h.conns.Delete(c.Request().Context(), p.OrganizationID, id, actorOf(p)); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// APITest: POST /api/v1/connections/{id}/test → 200 {"ok", "error", "connection"}; a failed
// test is ok false with its error (dbconn.Error's message: no text of the database server's,
// no resolved address, no password), not an error status.
func (h *ConnectionsHandler) APITest(c echo.Context) error {
	cn, err := h.test(c)
	if err != nil {
		return err
	}
	out := map[string]any{"ok": cn.LastTestError == "", "error": nil, "connection": apiConnectionOf(cn)}
	if cn.LastTestError != "" {
		out["error"] = cn.LastTestError
	}
	return c.JSON(http.StatusOK, out)
}
