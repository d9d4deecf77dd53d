package handlers

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"lifeline/models"
	"lifeline/services/audit"
	"lifeline/services/auth"
	"lifeline/views/i18n"
	"lifeline/views/pages"
)

// localeService is what the profile page needs.
type localeService interface {
	SetUserLocale(ctx context.Context, userID, language, timeZone string, supported func(string) bool) error
	SetOrgLocale(ctx context.Context, orgID, language, timeZone string, supported func(string) bool, actor audit.Actor) error
}

var _ localeService = (*auth.Service)(nil)

// ProfileHandler serves a user's own settings: language and time zone.
type ProfileHandler struct {
	*chrome
	locale localeService
	now    func() time.Time
}

// newProfileHandler returns the handler.
func newProfileHandler(ch *chrome, locale localeService) *ProfileHandler {
	return &ProfileHandler{chrome: ch, locale: locale, now: time.Now}
}

// commonZones are suggested in the time zone field; any IANA name is accepted.
var commonZones = []string{"Europe/Warsaw", "UTC", "Europe/London", "Europe/Dublin", "Europe/Berlin", "Europe/Paris",
	"Europe/Prague", "Europe/Vilnius", "Europe/Kyiv", "America/New_York", "America/Chicago", "Asia/Dubai", "Asia/Singapore"}

// Show renders the profile page.
func (h *ProfileHandler) Show(c echo.Context) error {
	p := principal(c)
	return h.render(c, http.StatusOK, p.Language, p.TimeZone, false, "", nil, h.orgForm(p, false))
}

// orgForm is the organization's defaults form for admins; nil for others.
func (h *ProfileHandler) orgForm(p *auth.Principal, saved bool) *pages.OrgLocaleForm {
	if !p.Can(models.RoleAdmin) {
		return nil
	}
	return &pages.OrgLocaleForm{Action: h.url("organization.save"), Language: p.OrgLanguage, TimeZone: p.OrgTimeZone, Saved: saved}
}

// SaveOrg stores the organization's default language and time zone (admins).
func (h *ProfileHandler) SaveOrg(c echo.Context) error {
	p := principal(c)
	lang, zone := c.FormValue("language"), strings.TrimSpace(c.FormValue("timeZone"))
	err := h.locale.SetOrgLocale(c.Request().Context(), p.OrganizationID, lang, zone, i18n.Supported, actorOf(p))
	if me := invalid(err); me != nil {
		f := &pages.OrgLocaleForm{Action: h.url("organization.save"), Language: lang, TimeZone: zone}
		f.FormError, f.Errors = translated(localizer(c), me.Message, me.Fields)
		return h.render(c, http.StatusUnprocessableEntity, p.Language, p.TimeZone, false, "", nil, f)
	}
	if err != nil {
		return err
	}
	p.OrgLanguage, p.OrgTimeZone = lang, zone
	localizeFor(c, p, false)
	return h.render(c, http.StatusOK, p.Language, p.TimeZone, false, "", nil, h.orgForm(p, true))
}

// Save stores the language and time zone; 422 with field messages when one is not valid.
func (h *ProfileHandler) Save(c echo.Context) error {
	p := principal(c)
	lang, zone := c.FormValue("language"), strings.TrimSpace(c.FormValue("timeZone"))
	err := h.locale.SetUserLocale(c.Request().Context(), p.UserID, lang, zone, i18n.Supported)
	if me := invalid(err); me != nil {
		return h.render(c, http.StatusUnprocessableEntity, lang, zone, false, me.Message, me.Fields, h.orgForm(p, false))
	}
	if err != nil {
		return err
	}
	// The page answers in the language and zone just chosen.
	p.Language, p.TimeZone = lang, zone
	localizeFor(c, p, false)
	return h.render(c, http.StatusOK, lang, zone, true, "", nil, h.orgForm(p, false))
}

func (h *ProfileHandler) render(c echo.Context, status int, lang, zone string, saved bool, msg string, fields map[string]string, org *pages.OrgLocaleForm) error {
	p, l := principal(c), localizer(c)
	orgLang := p.OrgLanguage
	if !i18n.Supported(orgLang) {
		orgLang = i18n.FromAcceptLanguage(c.Request().Header.Get("Accept-Language"))
	}
	orgZone := p.OrgTimeZone
	if orgZone == "" {
		orgZone = "UTC"
	}
	vm := pages.ProfileVM{Action: h.url("profile.save"), Email: p.Email, OrgID: p.OrganizationID, Admin: p.Can(models.RoleAdmin), Language: lang, TimeZone: zone,
		OrgLang: l.TOr("app.language."+orgLang, l.T("app.language."+i18n.Fallback)), OrgZone: orgZone, Zones: commonZones,
		Now: l.Time(h.now()) + " (" + l.Zone().String() + ")", Saved: saved, Org: org}
	vm.FormError, vm.Errors = translated(l, msg, fields)
	return render(c, status, pages.Profile(h.page(c, "profile.title", "profile"), vm))
}
