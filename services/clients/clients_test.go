package clients_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/clients"
)

// TestFieldValues: the NIP a client's other executions carry is what an accountant
// correcting that client's NIP typed wrong needs (the demo's walk, issue 21): the values of
// the field in the client's other runs, the most frequent first, without the value being
// corrected, another client's or another organization's, never a secret's, and none of runs
// that failed or wait in the DLQ (in the walk, a 9-digit NIP of another failed run was
// offered beside the right one).
func TestFieldValues(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		now := time.Now().UTC()
		tx := db.Conn(ctx)
		orgs := []string{models.NewID(), models.NewID()}
		wfs := map[string]string{}
		for _, id := range orgs {
			if err := tx.Create(&models.Organization{ID: id, Name: "Biuro " + id[:6], CreatedAt: now}).Error; err != nil {
				t.Fatal(err)
			}
			w := models.Workflow{ID: models.NewID(), OrganizationID: id, Name: "Płace", Version: 1, Definition: models.JSON(`{}`),
				UnknownErrors: "retry", WebhookToken: models.NewID(), WebhookSecret: "s", CreatedAt: now, UpdatedAt: now}
			if err := tx.Create(&w).Error; err != nil {
				t.Fatal(err)
			}
			wfs[id] = w.ID
		}
		run := func(org, client, input string, status ...string) string {
			c := client
			ex := models.Execution{ID: models.NewID(), OrganizationID: org, WorkflowID: wfs[org], WorkflowVersion: 1, Status: models.ExecSucceeded,
				Input: models.JSON(input), TriggerType: "api", CorrelationID: "c", About: models.About{Client: &c}, CreatedAt: now, UpdatedAt: now}
			if len(status) > 0 {
				ex.Status = status[0]
			}
			if err := tx.Create(&ex).Error; err != nil {
				t.Fatal(err)
			}
			return ex.ID
		}
		org, other := orgs[0], orgs[1]
		typo := run(org, "Jankowski", `{"clientNip": "645004606", "apiToken": "t-123456789"}`, models.ExecDLQPending)
		run(org, "Jankowski", `{"clientNip": "6450046206", "apiToken": "t-123456789"}`)
		run(org, "Jankowski", `{"clientNip": "6450046206"}`)
		run(org, "Jankowski", `{"clientNip": 6450046207}`)
		run(org, "Jankowski", `{"clientNip": "645004606"}`) // the same typo again: not a suggestion
		// Other typos, failed or waiting in the DLQ: no example of the right value.
		run(org, "Jankowski", `{"clientNip": "64500462"}`, models.ExecFailed)
		run(org, "Jankowski", `{"clientNip": "6540046206"}`, models.ExecDLQPending)
		run(org, "Jankowski", `{"clientNip": {"sealed": "x"}}`)
		run(org, "Mazur", `{"clientNip": "3848737482"}`)
		run(other, "Jankowski", `{"clientNip": "1111111111"}`)

		svc := clients.New(db)
		got, err := svc.FieldValues(ctx, org, "Jankowski", "clientNip", typo, "645004606")
		want := []clients.FieldValue{{Value: "6450046206", Count: 2}, {Value: "6450046207", Count: 1}}
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("values: %+v %v, want %+v", got, err, want)
		}
		if got, err := svc.FieldValues(ctx, org, "Jankowski", "apiToken", typo, ""); err != nil || len(got) != 0 {
			t.Errorf("a secret-looking field gave %+v %v", got, err)
		}
		if got, err := svc.FieldValues(ctx, org, "Nikt", "clientNip", typo, ""); err != nil || len(got) != 0 {
			t.Errorf("a client with no runs gave %+v %v", got, err)
		}
	})
}
