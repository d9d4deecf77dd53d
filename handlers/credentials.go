package handlers

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"lifeline/services/audit"
	"lifeline/services/credentials"
	"lifeline/views/i18n"
	"lifeline/views/pages"
)

// credentialService is what the credentials page needs.
type credentialService interface {
	List(ctx context.Context, orgID string) ([]credentials.Credential, error)
	Save(ctx context.Context, orgID string, actor audit.Actor, in credentials.Input) (*credentials.Credential, bool, error)
	Delete(ctx context.Context, orgID, id string, actor audit.Actor) (*credentials.Credential, error)
}

var _ credentialService = (*credentials.Service)(nil)

// CredentialsHandler serves the admins' organization credentials (/settings/credentials):
// list, add or replace by name, delete. A value is never shown or sent back after it is
// saved: only its last four characters. Another organization's id is a 404; field messages
// are 422.
type CredentialsHandler struct {
	*chrome
	creds credentialService
	// Now is the clock of relative times ("3 minutes ago").
	Now func() time.Time
}

// newCredentialsHandler returns the handler.
func newCredentialsHandler(ch *chrome, creds credentialService) *CredentialsHandler {
	return &CredentialsHandler{chrome: ch, creds: creds, Now: time.Now}
}

// List renders the page; ?done= confirms a change (and marks its row), ?name= fills the
// form's name (Replace).
func (h *CredentialsHandler) List(c echo.Context) error {
	vm := pages.CredentialsVM{Form: pages.CredentialForm{Name: strings.TrimSpace(c.QueryParam("name"))}}
	switch done := c.QueryParam("done"); done {
	case "created", "replaced", "deleted":
		vm.Done, vm.DoneName, vm.Form.Name = done, c.QueryParam("name"), ""
	}
	return h.render(c, http.StatusOK, vm)
}

// Save adds a credential or replaces the value of the one with that name: 422 with the
// form's messages (the value never sent back), or back to the list.
func (h *CredentialsHandler) Save(c echo.Context) error {
	p := principal(c)
	in := credentials.Input{Name: c.FormValue("name"), Value: c.FormValue("value")}
	saved, created, err := h.creds.Save(c.Request().Context(), p.OrganizationID, actorOf(p), in)
	if me := invalid(err); me != nil {
		f := pages.CredentialForm{Name: strings.TrimSpace(in.Name), Errors: me.Fields, FormError: me.Message, Retype: in.Value != ""}
		return h.render(c, http.StatusUnprocessableEntity, pages.CredentialsVM{Form: f})
	}
	if err != nil {
		return err
	}
	done := "replaced"
	if created {
		done = "created"
	}
	return redirect(c, h.url("credentials")+"?done="+done+"&name="+urlQueryEscape(saved.Name)+"#"+"credential-"+saved.ID)
}

// Delete deletes a credential (after the form's confirmation) and goes back to the list.
func (h *CredentialsHandler) Delete(c echo.Context) error {
	id := c.Param("id")
	if err := checkID(id, "credential"); err != nil {
		return err
	}
	p := principal(c)
	gone, err := h.creds.Delete(c.Request().Context(), p.OrganizationID, id, actorOf(p))
	if err != nil {
		return err
	}
	return redirect(c, h.url("credentials")+"?done=deleted&name="+urlQueryEscape(gone.Name))
}

func (h *CredentialsHandler) render(c echo.Context, status int, vm pages.CredentialsVM) error {
	p, l := principal(c), localizer(c)
	cs, err := h.creds.List(c.Request().Context(), p.OrganizationID)
	if err != nil {
		return err
	}
	now := h.Now()
	for _, cr := range cs {
		vm.Rows = append(vm.Rows, h.row(l, cr, now, vm.Done != "" && vm.DoneName == cr.Name))
		if cr.Name == vm.Form.Name {
			vm.Form.Replacing = true
		}
	}
	example := "ksefToken"
	if vm.Form.Name != "" && credentialName(vm.Form.Name) {
		example = vm.Form.Name
	}
	vm.Template = "{{ credentials." + example + " }}"
	vm.CSRF = csrfToken(c)
	vm.Form.Action = h.url("credentials.save")
	vm.Form.FormError, vm.Form.Errors = translated(l, vm.Form.FormError, vm.Form.Errors)
	if len(vm.Form.Errors) > 0 && vm.Form.FormError == "" {
		vm.Form.FormError = l.T("form.check")
	}
	return render(c, status, pages.Credentials(h.page(c, "credentials.title", "credentials"), vm))
}

// row is a credential for the page: never its value.
func (h *CredentialsHandler) row(l *i18n.Localizer, cr credentials.Credential, now time.Time, fresh bool) pages.CredentialRow {
	return pages.CredentialRow{ID: cr.ID, Name: cr.Name, Masked: "••••" + cr.Last4, Changed: rfc(cr.UpdatedAt),
		ChangedText: displayTime(l, cr.UpdatedAt), ChangedRelative: l.Relative(cr.UpdatedAt, now),
		ReplaceURL: h.url("credentials") + "?name=" + urlQueryEscape(cr.Name) + "#credential-form",
		DeleteURL:  h.url("credential.delete", cr.ID), Fresh: fresh}
}

// credentialName reports whether s is a name the lead may quote as a template.
func credentialName(s string) bool {
	for i, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && (r == '_' || r >= '0' && r <= '9')) {
			return false
		}
	}
	return len(s) <= 64
}
