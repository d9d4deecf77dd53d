package handlers

import (
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"lifeline/models"
	"lifeline/services/clients"
	"lifeline/views/pages"
)

// clientFieldValues gives the values a client's other executions hold in an input field
// (clients.Service.FieldValues).
type clientFieldValues func(ctx context.Context, orgID, client, field, exceptID, current string) ([]clients.FieldValue, error)

var _ clientFieldValues = (*clients.Service)(nil).FieldValues

// reasonField is the input field a service's validation reason names first: "clientNip:
// NIP „645004606” ma 9 cyfr…".
var reasonField = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*): `)

// clientValuesPanel tells whoever corrects a refused input what the client's other runs
// hold in the field the reason names (the demo's NIP typed wrong: the right NIP is in the
// client's other executions, four clicks away otherwise). Only where the editor is offered
// and the input has that field; a failed read leaves the hint out (logged).
func (h *DLQActionsHandler) clientValuesPanel(c echo.Context, rec *pages.RecoveryVM, dl *models.DeadLetter, ex *models.Execution) {
	if h.clientValues == nil || !rec.DataRefused || !rec.MayFix || ex.Client == nil {
		return
	}
	m := reasonField.FindStringSubmatch(dl.Reason)
	if m == nil {
		return
	}
	var in map[string]any
	if json.Unmarshal(ex.Input, &in) != nil {
		return
	}
	current, ok := scalarText(in[m[1]])
	if !ok {
		return
	}
	vals, err := h.clientValues(c.Request().Context(), principal(c).OrganizationID, *ex.Client, m[1], ex.ID, current)
	if err != nil {
		h.log.Warn("item page: the client's other values", "err", err)
		return
	}
	if len(vals) == 0 {
		return
	}
	l := localizer(c)
	v := &pages.ClientValuesVM{Field: m[1], Client: *ex.Client, ClientURL: h.clientURL(*ex.Client)}
	for _, fv := range vals {
		v.Values = append(v.Values, pages.ClientValue{Value: fv.Value, Count: l.N("recovery.clientvalues.count", fv.Count)})
	}
	rec.ClientValues = v
}

// scalarText is a JSON scalar as text (a string trimmed, a number as written); false for
// anything else (an object, such as a sealed secret).
func scalarText(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return strings.TrimSpace(x), true
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), true
	}
	return "", false
}
