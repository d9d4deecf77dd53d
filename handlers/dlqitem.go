package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"lifeline/models"
	"lifeline/views/i18n"
	"lifeline/views/pages"
)

func (s *Server) dlqRow(l *i18n.Localizer, r *models.DLQRow) pages.DLQRow {
	return pages.DLQRow{ID: r.ID, URL: s.url("dlq.item", r.ID), ExecutionURL: s.url("execution", r.ExecutionID),
		WorkflowName: r.WorkflowName, WorkflowURL: s.url("workflow", r.WorkflowID), FailedStep: r.FailedStepID,
		ErrorType: r.ErrorType, ErrorMessage: r.ErrorMessage, Status: r.Status,
		CreatedAt: rfc(r.CreatedAt), CreatedAtText: displayTime(l, r.CreatedAt), ExpiresAt: rfc(r.ExpiresAt), ExpiresAtText: relativeTime(l, r.ExpiresAt)}
}

func (s *Server) dlqItemPage(c echo.Context) error {
	id := c.Param("id")
	if err := checkID(id, "dead letter"); err != nil {
		return err
	}
	r, err := s.DB.GetDLQ(c.Request().Context(), principal(c).OrganizationID, id)
	if err != nil {
		return err
	}
	vm := pages.DLQItemVM{Row: s.dlqRow(localizer(c), r), ErrorCode: deref(r.ErrorCode), StackTrace: deref(r.StackTrace),
		OriginalInputJSON: prettyJSON(r.OriginalInput), StepStatesJSON: prettyJSON(r.StepStates), ManualRetries: r.ManualRetryCount,
		ListURL: s.url("dlq")}
	return render(c, http.StatusOK, pages.DLQItem(s.page(c, localizer(c).T("title.dlqitem", "Workflow", r.WorkflowName), "dlq"), vm))
}

func (s *Server) apiGetDLQ(c echo.Context) error {
	id := c.Param("id")
	if err := checkID(id, "dead letter"); err != nil {
		return err
	}
	r, err := s.DB.GetDLQ(c.Request().Context(), principal(c).OrganizationID, id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, apiDLQ(r, true))
}
