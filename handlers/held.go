package handlers

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"lifeline/models"
	"lifeline/services/audit"
	"lifeline/services/auth"
	"lifeline/services/engine"
	"lifeline/services/poison"
	"lifeline/views/i18n"
	"lifeline/views/pages"
)

// heldService is what quarantining poison input values needs (engine.Held).
type heldService interface {
	List(ctx context.Context, orgID string) ([]models.HeldValue, error)
	Hold(ctx context.Context, r engine.HoldRequest) (*models.HeldValue, error)
	Release(ctx context.Context, orgID, id string, actor audit.Actor, by string) (*models.HeldValue, error)
}

var _ heldService = engine.Held{}

// HeldHandler quarantines poison input values and releases them (issue 22): the admins'
// list under Settings, the forms of an item's or a group's flag, and the API.
type HeldHandler struct {
	*chrome
	svc heldService
}

func newHeldHandler(ch *chrome, svc heldService) *HeldHandler {
	return &HeldHandler{chrome: ch, svc: svc}
}

// List: GET /settings/quarantine, the organization's quarantined values.
func (h *HeldHandler) List(c echo.Context) error {
	p, l := principal(c), localizer(c)
	rows, err := h.svc.List(c.Request().Context(), p.OrganizationID)
	if err != nil {
		return err
	}
	vm := pages.HeldVM{CSRF: csrfToken(c), Done: c.QueryParam("done")}
	for _, r := range rows {
		vm.Rows = append(vm.Rows, pages.HeldRow{ID: r.ID, Kind: kindText(l, r.Kind), Value: r.Value, Note: r.Note, By: r.HeldBy,
			At: displayTime(l, r.HeldAt), AtISO: rfc(r.HeldAt), SearchURL: h.searchURL(r.Value), ReleaseURL: h.url("quarantine.release", r.ID)})
	}
	return render(c, http.StatusOK, pages.Held(h.page(c, l.T("nav.quarantine"), "quarantine"), vm))
}

// Hold: POST /settings/quarantine (value, note, back) from a flag: the value is
// quarantined and the page it came from (back) shows it so.
func (h *HeldHandler) Hold(c echo.Context) error {
	p := principal(c)
	if _, err := h.svc.Hold(c.Request().Context(), engine.HoldRequest{OrganizationID: p.OrganizationID, Value: c.FormValue("value"),
		Note: c.FormValue("note"), Actor: actorOf(p), By: byOf(p)}); err != nil {
		return err
	}
	return redirect(c, h.back(c, ""))
}

// Release: POST /settings/quarantine/{id}/release (back): the value is released.
func (h *HeldHandler) Release(c echo.Context) error {
	if err := h.release(c); err != nil {
		return err
	}
	return redirect(c, h.back(c, "?done=released"))
}

func (h *HeldHandler) release(c echo.Context) error {
	p := principal(c)
	id := c.Param("id")
	if err := checkID(id, "held value"); err != nil {
		return err
	}
	_, err := h.svc.Release(c.Request().Context(), p.OrganizationID, id, actorOf(p), byOf(p))
	return err
}

// back is the page a form came from: a DLQ item or group page of this app (a path, never
// another site's address), else the list of quarantined values (with done).
func (h *HeldHandler) back(c echo.Context, done string) string {
	b := c.FormValue("back")
	if strings.HasPrefix(b, "/dlq/") && !strings.ContainsAny(b, `\`) && !strings.Contains(b, "//") {
		return b
	}
	return h.url("quarantine") + done
}

func (h *HeldHandler) searchURL(value string) string {
	return h.url("dlq") + "?" + url.Values{"q": {value}}.Encode()
}

// byOf names who acted, for people: the user's e-mail address, or the API token.
func byOf(p *auth.Principal) string {
	if p.Email != "" {
		return p.Email
	}
	return "API token " + shortID(p.TokenID)
}

type apiHeld struct {
	ID         string  `json:"id"`
	Kind       string  `json:"kind"`
	Value      string  `json:"value"`
	Note       string  `json:"note"`
	HeldBy     string  `json:"heldBy"`
	HeldAt     string  `json:"heldAt"`
	ReleasedAt *string `json:"releasedAt"`
	ReleasedBy *string `json:"releasedBy"`
}

func apiHeldOf(v *models.HeldValue) apiHeld {
	return apiHeld{ID: v.ID, Kind: v.Kind, Value: v.Value, Note: v.Note, HeldBy: v.HeldBy, HeldAt: rfc(v.HeldAt),
		ReleasedAt: rfcPtr(v.ReleasedAt), ReleasedBy: v.ReleasedBy}
}

// APIList: GET /api/v1/quarantine → {"items": [{id, kind, value, note, heldBy, heldAt}]},
// the values quarantined now, newest first. Every role reads it.
func (h *HeldHandler) APIList(c echo.Context) error {
	rows, err := h.svc.List(c.Request().Context(), principal(c).OrganizationID)
	if err != nil {
		return err
	}
	out := make([]apiHeld, 0, len(rows))
	for i := range rows {
		out = append(out, apiHeldOf(&rows[i]))
	}
	return c.JSON(http.StatusOK, map[string]any{"items": out})
}

// APIHold: POST /api/v1/quarantine {"value", "note"} → 201 with the hold; 422 naming value
// or note; 409 when the value is quarantined already. Admins.
func (h *HeldHandler) APIHold(c echo.Context) error {
	var body struct {
		Value string `json:"value"`
		Note  string `json:"note"`
	}
	if err := decodeBody(c, &body); err != nil {
		return err
	}
	p := principal(c)
	v, err := h.svc.Hold(c.Request().Context(), engine.HoldRequest{OrganizationID: p.OrganizationID, Value: body.Value, Note: body.Note,
		Actor: actorOf(p), By: byOf(p)})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, apiHeldOf(v))
}

// APIRelease: POST /api/v1/quarantine/{id}/release → 200 with the released hold; 404 for
// another organization's; 409 when released already. Admins.
func (h *HeldHandler) APIRelease(c echo.Context) error {
	p := principal(c)
	id := c.Param("id")
	if err := checkID(id, "held value"); err != nil {
		return err
	}
	v, err := h.svc.Release(c.Request().Context(), p.OrganizationID, id, actorOf(p), byOf(p))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, apiHeldOf(v))
}

// kindText names a value's kind in the reader's language.
func kindText(l *i18n.Localizer, kind string) string { return l.TOr("poison.kind."+kind, kind) }

// flagger builds the poison flags of an item or a group page (nil: no flags).
type flagger struct {
	links
	held heldService
}

// flags turns the checked values into the page's flags: the poison ones and the held ones,
// with the reader's actions (admins quarantine or release; others are told an admin can).
// back is the page's own address.
func (f *flagger) flags(c echo.Context, checked []poison.Flag, back string) ([]pages.PoisonFlag, error) {
	if f == nil || len(checked) == 0 {
		return nil, nil
	}
	p, l := principal(c), localizer(c)
	rows, err := f.held.List(c.Request().Context(), p.OrganizationID)
	if err != nil {
		return nil, err
	}
	held := map[string]*models.HeldValue{}
	for i := range rows {
		held[rows[i].Kind+"\x00"+rows[i].Value] = &rows[i]
	}
	admin := p.Can(models.RoleAdmin)
	var out []pages.PoisonFlag
	for _, fl := range checked {
		hv := held[fl.Kind+"\x00"+fl.Key]
		poisonHere := fl.Poison && fl.Here // the cause of this page's failures, not a bystander
		if !poisonHere && hv == nil {
			continue
		}
		pf := pages.PoisonFlag{Kind: kindText(l, fl.Kind), Value: fl.Key, BackURL: back, CSRF: csrfToken(c),
			SearchURL: f.url("dlq") + "?" + url.Values{"q": {fl.Text()}}.Encode(), AdminOnly: !admin}
		if poisonHere {
			pf.Text = poisonText(l, fl)
		}
		if hv != nil {
			pf.Held = true
			pf.HeldText = l.T("poison.held", "At", displayTime(l, hv.HeldAt), "By", hv.HeldBy, "Note", hv.Note)
			if admin {
				pf.ReleaseURL = f.url("quarantine.release", hv.ID)
			}
		} else if admin {
			pf.HoldURL = f.url("quarantine.hold")
		}
		out = append(out, pf)
	}
	return out, nil
}
