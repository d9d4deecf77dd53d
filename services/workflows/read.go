package workflows

import (
	"context"

	"lifeline/models"
)

// The reads of workflows, for pages and the API. Each takes the organization id and never
// returns another organization's workflow.

// Get returns a workflow of the organization. Errors: ENOTFOUND.
func (s *Service) Get(ctx context.Context, orgID, id string) (*models.Workflow, error) {
	return s.DB.GetWorkflow(ctx, orgID, id)
}

// All returns the organization's workflows by name.
func (s *Service) All(ctx context.Context, orgID string) ([]models.Workflow, error) {
	return s.DB.Workflows(ctx, orgID)
}

// List returns the organization's workflows by name with their execution stats (two more
// queries than All).
func (s *Service) List(ctx context.Context, orgID string) ([]models.Workflow, map[string]models.WorkflowStats, error) {
	return s.DB.ListWorkflows(ctx, orgID)
}

// ByWebhookToken finds the workflow an inbound webhook token belongs to (of any
// organization: the token is the credential). Errors: ENOTFOUND ("webhook").
func (s *Service) ByWebhookToken(ctx context.Context, token string) (*models.Workflow, error) {
	return s.DB.WorkflowByWebhookToken(ctx, token)
}

// Version returns the definition of one version of a workflow of the organization.
// Errors: ENOTFOUND.
func (s *Service) Version(ctx context.Context, orgID, id string, version int) (models.JSON, error) {
	return s.DB.WorkflowVersionDef(ctx, orgID, id, version)
}
