package handlers

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"lifeline/models"
	"lifeline/services/audit"
	"lifeline/services/auth"
	"lifeline/views/pages"
)

// tokenService is what the API tokens page needs.
type tokenService interface {
	Tokens(ctx context.Context, orgID string) ([]models.APIToken, error)
	IssueToken(ctx context.Context, r auth.TokenRequest) (string, *models.APIToken, error)
	RevokeToken(ctx context.Context, orgID, id string, actor audit.Actor) (*models.APIToken, error)
}

var _ tokenService = (*auth.Service)(nil)

// TokensHandler serves the admins' API tokens page: list, create (plain text shown once),
// revoke.
type TokensHandler struct {
	*chrome
	tokens tokenService
	now    func() time.Time
}

// newTokensHandler returns the handler.
func newTokensHandler(ch *chrome, tokens tokenService) *TokensHandler {
	return &TokensHandler{chrome: ch, tokens: tokens, now: time.Now}
}

// expiryChoices are the form's expiry options (days; "never").
var expiryChoices = []struct{ value, label string }{
	{"30", "tokens.expires.30"}, {"90", "tokens.expires.90"}, {"365", "tokens.expires.365"}, {"never", "tokens.expires.never"},
}

// List renders the page.
func (h *TokensHandler) List(c echo.Context) error {
	return h.render(c, http.StatusOK, pages.TokenForm{Role: models.RoleAccountant, Expires: "90"}, "", "")
}

// Create issues a token from the form: 422 with field messages, or the page with the
// token's plain text shown once.
func (h *TokensHandler) Create(c echo.Context) error {
	p := principal(c)
	f := pages.TokenForm{Name: c.FormValue("name"), Role: c.FormValue("role"), Expires: c.FormValue("expires")}
	var ttl time.Duration
	switch f.Expires {
	case "never":
	default:
		days, err := strconv.Atoi(f.Expires)
		if err != nil || days < 1 || days > 5*365 {
			f.Errors = map[string]string{"expires": "tokens.error.expires"}
			f.FormError = "form.check"
			return h.render(c, http.StatusUnprocessableEntity, f, "", "")
		}
		ttl = time.Duration(days) * 24 * time.Hour
	}
	if f.Name == "" {
		f.Errors = map[string]string{"name": "tokens.error.name"}
		f.FormError = "form.check"
		return h.render(c, http.StatusUnprocessableEntity, f, "", "")
	}
	plain, t, err := h.tokens.IssueToken(c.Request().Context(), auth.TokenRequest{OrganizationID: p.OrganizationID, Role: f.Role,
		Name: f.Name, TTL: ttl, MaxRole: p.Role, Actor: actorOf(p)})
	if me := invalid(err); me != nil {
		f.Errors, f.FormError = me.Fields, me.Message
		return h.render(c, http.StatusUnprocessableEntity, f, "", "")
	}
	if err != nil {
		return err
	}
	return h.render(c, http.StatusCreated, pages.TokenForm{Role: models.RoleAccountant, Expires: "90"}, plain, t.Name)
}

// Revoke revokes a token of the organization (404 for another's) and shows the list.
func (h *TokensHandler) Revoke(c echo.Context) error {
	p := principal(c)
	id := c.Param("id")
	if err := checkID(id, "API token"); err != nil {
		return err
	}
	if _, err := h.tokens.RevokeToken(c.Request().Context(), p.OrganizationID, id, actorOf(p)); err != nil {
		return err
	}
	return redirect(c, h.url("tokens"))
}

func (h *TokensHandler) render(c echo.Context, status int, f pages.TokenForm, created, createdName string) error {
	p := principal(c)
	ts, err := h.tokens.Tokens(c.Request().Context(), p.OrganizationID)
	if err != nil {
		return err
	}
	now, l := h.now(), localizer(c)
	vm := pages.TokensVM{Created: created, CreatedName: createdName, OrgID: p.OrganizationID, APIDocURL: h.url("api.openapi")}
	for _, t := range ts {
		r := pages.TokenRow{ID: t.ID, Name: t.Name, Role: t.Role, CreatedAt: rfc(t.CreatedAt), Created: displayTime(l, t.CreatedAt),
			LastUsed: l.T("tokens.never"), Expires: l.T("tokens.never"), Status: "active"}
		if r.Name == "" {
			r.Name = l.T("tokens.unnamed")
		}
		if t.LastUsedAt != nil {
			r.LastUsed = displayTime(l, *t.LastUsedAt)
		}
		if t.ExpiresAt != nil {
			r.Expires = displayTime(l, *t.ExpiresAt)
			if !now.Before(*t.ExpiresAt) {
				r.Status = "expired"
			}
		}
		if t.RevokedAt != nil {
			r.Status = "revoked"
		}
		if r.Status == "active" {
			r.RevokeURL = h.url("tokens.revoke", t.ID)
		}
		r.StatusText = l.T("tokens.status." + r.Status)
		r.Role = l.TOr("role."+r.Role, r.Role)
		vm.Rows = append(vm.Rows, r)
	}
	f.Action = h.url("tokens.create")
	for _, role := range models.Roles {
		if models.RoleAtLeast(p.Role, role) {
			f.Roles = append(f.Roles, pages.Option{Value: role, Label: l.TOr("role."+role, role), Selected: role == f.Role})
		}
	}
	for _, e := range expiryChoices {
		f.ExpiresIn = append(f.ExpiresIn, pages.Option{Value: e.value, Label: l.T(e.label), Selected: e.value == f.Expires})
	}
	f.FormError, f.Errors = translated(l, f.FormError, f.Errors)
	vm.Form = f
	return render(c, status, pages.Tokens(h.page(c, "nav.tokens", "tokens"), vm))
}
