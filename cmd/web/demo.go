package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/audit"
	"lifeline/services/auth"
	"lifeline/services/credentials"
	"lifeline/services/demo"
	"lifeline/services/engine"
	"lifeline/services/escalation"
	"lifeline/services/periods"
	"lifeline/services/sandbox"
	"lifeline/services/workflows"
)

// Demo accounts (printed at start; the demo is for a laptop, never for production).
var demoUsers = []struct{ Email, Password, Role string }{
	{"admin@demo.lifeline.local", "demo-admin-2026", models.RoleAdmin},
	{"ksiegowa@demo.lifeline.local", "demo-accountant-2026", models.RoleAccountant},
	{"podglad@demo.lifeline.local", "demo-viewer-2026", models.RoleViewer},
}

type demoSeed struct {
	OrgID   string
	created bool
	wfIDs   map[string]string
}

// seedDemo creates the demo organization, its users and workflows once; later starts
// reuse them.
func seedDemo(ctx context.Context, db *models.DB, as *auth.Service, wfs *workflows.Service, sandboxBase string) (*demoSeed, error) {
	d := &demoSeed{wfIDs: map[string]string{}}
	var org models.Organization
	err := db.Conn(ctx).Where("name = ?", demo.Organization).Order("created_at").First(&org).Error
	switch {
	case models.IsNotFound(err):
		o, err := as.CreateOrg(ctx, demo.Organization)
		if err != nil {
			return nil, err
		}
		org, d.created = *o, true
		// A Polish office: Polish pages and Warsaw time unless a user chooses otherwise.
		if err := db.Conn(ctx).Model(&org).Updates(map[string]any{"default_language": "pl", "time_zone": "Europe/Warsaw"}).Error; err != nil {
			return nil, err
		}
	case err != nil:
		return nil, err
	}
	d.OrgID = org.ID
	var admin audit.Actor
	for _, u := range demoUsers {
		user, err := as.CreateUser(ctx, org.ID, u.Email, u.Password, u.Role)
		if err != nil {
			return nil, err
		}
		if u.Role == models.RoleAdmin {
			admin = audit.Actor{Type: audit.ActorUser, ID: user.ID}
		}
	}
	if d.created {
		if err := seedClosedPeriods(ctx, db, org.ID, admin); err != nil {
			return nil, err
		}
	}
	if err := seedKSeFToken(ctx, db, org.ID); err != nil {
		return nil, err
	}
	if d.created {
		// The demo office's escalation: a problem left pending 10 minutes goes to the admins
		// (so the night's failures escalate within the demo's first quarter of an hour), one
		// left 4 hours to the owners. Set once: an admin's change stays.
		if _, err := (&escalation.Service{DB: db}).Save(ctx, org.ID, audit.System, escalation.Policy{Levels: []escalation.Level{
			{AfterMs: (10 * time.Minute).Milliseconds(), To: []string{"role:admin"}},
			{AfterMs: (4 * time.Hour).Milliseconds(), To: []string{"role:owner"}},
		}}); err != nil {
			return nil, fmt.Errorf("demo escalation: %w", err)
		}
	}
	existing, err := db.Workflows(ctx, org.ID)
	if err != nil {
		return nil, err
	}
	for _, wf := range existing {
		d.wfIDs[wf.Name] = wf.ID
	}
	for _, raw := range demo.Definitions(sandboxBase) {
		var probe struct{ Name string }
		if err := jsonUnmarshal(raw, &probe); err != nil {
			return nil, err
		}
		if _, ok := d.wfIDs[probe.Name]; ok {
			continue
		}
		wf, err := wfs.Create(ctx, org.ID, audit.System, raw)
		if err != nil {
			return nil, fmt.Errorf("demo workflow %q: %w", probe.Name, err)
		}
		d.wfIDs[wf.Name] = wf.ID
	}
	return d, nil
}

// seedKSeFToken gives the demo organization, once, the office's KSeF token that expired
// this morning (sandbox.ExpiredKSeFToken): the KSeF downloads fail with 401 until an admin
// uploads the new one (shown on /demo/inbox) under the same name.
func seedKSeFToken(ctx context.Context, db *models.DB, orgID string) error {
	have, err := credentials.New(db, nil).List(ctx, orgID)
	if err != nil {
		return err
	}
	for _, c := range have {
		if c.Name == demo.CredentialKSeF {
			return nil
		}
	}
	_, _, err = credentials.New(db, nil).Save(ctx, orgID, audit.System, credentials.Input{Name: demo.CredentialKSeF, Value: sandbox.ExpiredKSeFToken})
	return err
}

// seedClosedPeriods closes, on the first run, the periods the demo office has closed
// (demo.ClosedPeriods: September for one client), by its admin: the morning's late
// September statement is refused at the posting (issue 23).
func seedClosedPeriods(ctx context.Context, db *models.DB, orgID string, admin audit.Actor) error {
	svc := periods.New(db, nil)
	for _, c := range demo.ClosedPeriods() {
		_, err := svc.Close(ctx, orgID, admin, periods.Input{Period: c.Period, Client: c.Client, Note: c.Note})
		if err != nil && apperr.ErrorCode(err) != apperr.ECONFLICT {
			return fmt.Errorf("demo closed period %s: %w", c.Period, err)
		}
	}
	return nil
}

// kickoff starts, on the first run, the demo's morning (demo.Morning): the night's failures of
// five kinds (NIPs typed wrong, an address without "@", invoices not yet in KSeF, used-up
// payroll quotas, KSeF downloads with the expired token), a VAT filing sent back to its preparer, and an import that goes through, so
// whoever opens the demo first finds what an accountant finds at 8 a.m.
func (d *demoSeed) kickoff(ctx context.Context, eng *engine.Engine) error {
	if !d.created {
		return nil
	}
	// The night's work, and a large VAT return waiting for the partner's approval.
	for _, s := range append(demo.Morning(), demo.Waiting(time.Now())...) {
		id, ok := d.wfIDs[s.Workflow]
		if !ok {
			continue
		}
		if _, _, err := eng.Start(ctx, engine.StartRequest{OrganizationID: d.OrgID, WorkflowID: id, Input: models.MustJSON(s.Input),
			Trigger: engine.TriggerDemo, Actor: audit.System}); err != nil {
			return err
		}
	}
	return nil
}

func (d *demoSeed) print(w io.Writer, baseURL string) {
	fmt.Fprintf(w, "\n  Lifeline demo is running at %s\n  Organization: %s\n", baseURL, demo.Organization)
	for _, u := range demoUsers {
		fmt.Fprintf(w, "    %-11s %-32s password: %s\n", u.Role, u.Email, u.Password)
	}
	fmt.Fprintf(w, "  Notifications the demo sends (its mail server, Slack and Teams stand-ins): %s/demo/inbox\n", baseURL)
	fmt.Fprintln(w)
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
