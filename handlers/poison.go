package handlers

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"lifeline/services/poison"
	"lifeline/views/i18n"
)

// poisonChecker flags an item's poison input values (poison.Service).
type poisonChecker interface {
	Item(ctx context.Context, orgID, id string) ([]poison.Flag, error)
}

var _ poisonChecker = (*poison.Service)(nil)

// PoisonHandler says whether a dead letter's input values break runs elsewhere (issue 22).
type PoisonHandler struct {
	svc poisonChecker
}

func newPoisonHandler(svc poisonChecker) *PoisonHandler { return &PoisonHandler{svc: svc} }

type apiPoisonFlag struct {
	poison.Flag
	// Text says it in the reader's language when the value is poison ("this document has
	// failed 3 times in 2 workflows"); "" otherwise.
	Text string `json:"text,omitempty"`
}

// APIItem: GET /api/v1/dlq/{id}/poison → {"flags": [{kind, value, items, failures,
// workflows, poison, here, text}]}, one per identifier in the item's input; "poison": true
// when the value failed in 2 workflows or 3 times; "here": true when this item's failure
// counts for it.
func (h *PoisonHandler) APIItem(c echo.Context) error {
	id := c.Param("id")
	if err := checkID(id, "dead letter"); err != nil {
		return err
	}
	flags, err := h.svc.Item(c.Request().Context(), principal(c).OrganizationID, id)
	if err != nil {
		return err
	}
	l := localizer(c)
	out := make([]apiPoisonFlag, 0, len(flags))
	for _, f := range flags {
		a := apiPoisonFlag{Flag: f}
		if f.Poison {
			a.Text = poisonText(l, f)
		}
		out = append(out, a)
	}
	return c.JSON(http.StatusOK, map[string]any{"flags": out})
}

// poisonText says how a poison value failed: "ten dokument nie przeszedł 3 razy w 2
// przepływach".
func poisonText(l *i18n.Localizer, f poison.Flag) string {
	return l.T("poison.flag", "Times", l.N("poison.times", f.Failures), "Workflows", l.N("poison.workflows", f.Workflows))
}
