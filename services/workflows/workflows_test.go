package workflows_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/audit"
	"lifeline/services/steps"
	"lifeline/services/workflows"
)

// TestWebhookURLsRoundTripMasked: a definition is shown with its webhook URLs masked, and
// saved back as shown it keeps them; a new URL replaces the stored one.
func TestWebhookURLsRoundTripMasked(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		org := models.Organization{ID: models.NewID(), Name: "Biuro Webhooki"}
		if err := db.Conn(ctx).Create(&org).Error; err != nil {
			t.Fatal(err)
		}
		wfs := &workflows.Service{DB: db, Steps: steps.Builtins(http.DefaultClient)}
		hook := "https://hooks.slack.com/services/T1/B1/SECRET-PART"
		wf, err := wfs.Create(ctx, org.ID, audit.System, []byte(`{"name": "VAT", "settings": {"errorNotifications": {"channels": ["slack"], "slackWebhookUrl": "`+hook+`"}},
		  "steps": [{"id": "t", "type": "transform", "config": {"output": 1}}]}`))
		if err != nil {
			t.Fatal(err)
		}
		shown := string(workflows.MaskWebhooks(wf.Definition))
		if strings.Contains(shown, "SECRET-PART") || !strings.Contains(shown, "https://hooks.slack.com"+models.MaskedWebhookMark) {
			t.Fatalf("shown %s", shown)
		}
		if _, err := wfs.Update(ctx, org.ID, wf.ID, audit.System, []byte(strings.Replace(shown, `"VAT"`, `"VAT 2"`, 1))); err != nil {
			t.Fatal(err)
		}
		got, err := db.GetWorkflow(ctx, org.ID, wf.ID)
		if err != nil || got.Name != "VAT 2" || !strings.Contains(string(got.Definition), hook) {
			t.Fatalf("after saving it back masked: %s %v", got.Definition, err)
		}
		other := "https://hooks.slack.com/services/T2/B2/NEW"
		if _, err := wfs.Update(ctx, org.ID, wf.ID, audit.System, []byte(strings.Replace(shown, "https://hooks.slack.com"+models.MaskedWebhookMark, other, 1))); err != nil {
			t.Fatal(err)
		}
		if got, _ := db.GetWorkflow(ctx, org.ID, wf.ID); !strings.Contains(string(got.Definition), other) {
			t.Errorf("a new URL did not replace the stored one: %s", got.Definition)
		}
	})
}
