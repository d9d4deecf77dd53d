package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/audit"
	"lifeline/services/engine"
	"lifeline/services/fingerprint"
)

// nipOffice refuses every NIP as the demo's sandbox office does ("NIP „…” ma 9 cyfr…", a
// 400), and answers 503 to the NIP "down".
func nipOffice() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Nip string }
		_ = json.NewDecoder(r.Body).Decode(&body)
		w.Header().Set("Content-Type", "application/json")
		if body.Nip == "down" {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"error": "service unavailable"}`)
			return
		}
		w.WriteHeader(http.StatusBadRequest)
		msg := fmt.Sprintf("NIP „%s” ma %d cyfr, a powinien mieć 10", body.Nip, len(body.Nip))
		_ = json.NewEncoder(w).Encode(map[string]any{"error": "validation", "message": msg, "fields": map[string]string{"clientNip": msg}})
	}))
}

const noRetries = `{"maxRetries": 0, "initialDelayMs": 1000, "backoffMultiplier": 1, "jitterRatio": 0}`

// A failure group gathers the dead letters of one cause across clients through the engine's
// failure path, keeps another type apart, resolves when its last item is settled, and
// reopens (remembering when it was resolved) when the cause comes back.
func TestFailureGroupsThroughTheEngine(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		h := newHarness(t, db)
		srv := nipOffice()
		defer srv.Close()
		ctx := context.Background()
		wf := h.workflow(strings.Replace(httpDef(srv.URL, noRetries), `"settings": {`, `"settings": {"subject": "Klient {{ input.nip }}", `, 1))
		var dls []*models.DeadLetter
		for _, nip := range []string{"526104082", "701000213", "123456789", "down"} {
			ex := h.start(wf, fmt.Sprintf(`{"nip": %q}`, nip))
			if got := h.wait(ex.ID, 20*time.Second); got.Status != models.ExecDLQPending {
				t.Fatalf("%s: %s", nip, got.Status)
			}
			dl, err := db.DLQForExecution(ctx, h.org, ex.ID)
			if err != nil || dl == nil || dl.GroupID == nil {
				t.Fatalf("%s: dead letter %+v %v", nip, dl, err)
			}
			dls = append(dls, dl)
		}
		groups, _, err := db.ListGroups(ctx, h.org, models.GroupFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(groups) != 2 {
			t.Fatalf("%d groups, want 2 (the NIP's and the outage's)", len(groups))
		}
		nip, err := db.GetGroup(ctx, h.org, *dls[0].GroupID)
		if err != nil {
			t.Fatal(err)
		}
		if *dls[1].GroupID != nip.ID || *dls[2].GroupID != nip.ID || *dls[3].GroupID == nip.ID {
			t.Fatal("the NIP failures are not one group apart from the outage")
		}
		if nip.Counts != (models.GroupCounts{Pending: 3}) || nip.StateNow != models.GroupOpen || nip.StepID != "fetch" ||
			nip.ErrorType != "validation" || nip.WorkflowName != "Import" || nip.Title != "clientNip: NIP „…” ma … cyfr, a powinien mieć … (400 Bad Request)" {
			t.Fatalf("group %+v", nip)
		}
		// The fingerprint the engine worked out before the failure's transaction is the one
		// of the item it wrote (what a backfill or a split would work out again).
		for _, dl := range dls[:3] {
			if p := fingerprint.Of(fingerprint.Failure{WorkflowID: dl.WorkflowID, StepID: dl.FailedStepID, ErrorType: dl.ErrorType,
				ErrorCode: nip.ErrorCode, Reason: dl.Reason}); p.Hash != nip.Fingerprint || p.Template != nip.Title {
				t.Errorf("item %s: fingerprint %s (%q), its group's %s (%q)", dl.ID, p.Hash, p.Template, nip.Fingerprint, nip.Title)
			}
		}
		if strings.Join(nip.Subjects, ",") != "Klient 123456789,Klient 526104082,Klient 701000213" {
			t.Errorf("subjects %q", nip.Subjects)
		}
		if sum(nip.Arrivals24h) != 3 {
			t.Errorf("arrivals in 24 h %v, want 3", nip.Arrivals24h)
		}
		if _, err := db.GetGroup(ctx, models.NewID(), nip.ID); err == nil {
			t.Fatal("another organization reads the group")
		}

		for _, dl := range dls[:3] {
			if _, err := h.eng.Settle(ctx, engine.SettleRequest{OrganizationID: h.org, DeadLetterID: dl.ID, Status: models.DLQSkipped, Actor: audit.System}); err != nil {
				t.Fatal(err)
			}
		}
		nip, _ = db.GetGroup(ctx, h.org, nip.ID)
		if nip.StateNow != models.GroupResolved || nip.Counts != (models.GroupCounts{Closed: 3}) || nip.ResolvedAt == nil {
			t.Fatalf("after its last item was skipped: %+v", nip)
		}
		resolved := *nip.ResolvedAt

		ex := h.start(wf, `{"nip": "999"}`)
		h.wait(ex.ID, 20*time.Second)
		again, _ := db.DLQForExecution(ctx, h.org, ex.ID)
		nip, _ = db.GetGroup(ctx, h.org, nip.ID)
		if *again.GroupID != nip.ID || nip.StateNow != models.GroupOpen || nip.ResolvedBefore == nil || !nip.ResolvedBefore.Equal(resolved) ||
			nip.Counts.Pending != 1 || nip.Arrivals != 4 {
			t.Fatalf("the recurrence did not reopen the group: %+v", nip)
		}
		// Its items, and nothing else, by the list's group filter.
		rows, _, err := db.ListDLQ(ctx, h.org, models.DLQFilter{GroupID: nip.ID})
		if err != nil || len(rows) != 4 {
			t.Fatalf("the group's items: %d, %v", len(rows), err)
		}
		if drift, err := db.GroupCountDrift(ctx, h.org); err != nil || len(drift) > 0 {
			t.Fatalf("groups' counts differ from their items': %+v, %v", drift, err)
		}
	})
}

// The dead letters made before groups get theirs at start: once, whatever runs it again.
func TestBackfillGroups(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		h := newHarness(t, db)
		srv := nipOffice()
		defer srv.Close()
		ctx := context.Background()
		wf := h.workflow(httpDef(srv.URL, noRetries))
		var ids []string
		for _, nip := range []string{"526104082", "701000213", "down"} {
			ex := h.start(wf, fmt.Sprintf(`{"nip": %q}`, nip))
			h.wait(ex.ID, 20*time.Second)
			dl, _ := db.DLQForExecution(ctx, h.org, ex.ID)
			ids = append(ids, dl.ID)
		}
		// As before migration 00021: no groups (the items hold amounts, which their groups
		// count once they are backfilled).
		if err := db.Conn(ctx).Exec("UPDATE dead_letter_queue SET group_id = NULL, amount_minor = 1842305 WHERE organization_id = ?", h.org).Error; err != nil {
			t.Fatal(err)
		}
		if err := db.Conn(ctx).Exec("DELETE FROM dlq_groups WHERE organization_id = ?", h.org).Error; err != nil {
			t.Fatal(err)
		}
		if _, err := h.eng.Settle(ctx, engine.SettleRequest{OrganizationID: h.org, DeadLetterID: ids[2], Status: models.DLQResolved, Actor: audit.System}); err != nil {
			t.Fatal(err)
		}
		if _, err := h.eng.Groups().Backfill(ctx, 2); err != nil {
			t.Fatal(err)
		}
		if n, err := h.eng.Groups().Backfill(ctx, 2); err != nil || n != 0 {
			t.Fatalf("a second backfill read %d items (%v), want 0", n, err)
		}
		groups, _, err := db.ListGroups(ctx, h.org, models.GroupFilter{})
		if err != nil || len(groups) != 2 {
			t.Fatalf("%d groups (%v), want 2", len(groups), err)
		}
		states := map[int]string{}
		for _, g := range groups {
			states[g.Counts.Pending+g.Counts.Closed*10] = g.StateNow
		}
		if states[2] != models.GroupOpen || states[10] != models.GroupResolved {
			t.Fatalf("backfilled groups by counts: %v", states)
		}
		if drift, err := db.GroupCountDrift(ctx, h.org); err != nil || len(drift) > 0 {
			t.Fatalf("backfilled groups' counts differ from their items': %+v, %v", drift, err)
		}
	})
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}
