package handlers_test

import (
	"encoding/csv"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/audit"
)

var (
	auditRow    = regexp.MustCompile(`data-testid="audit-row" data-id="([^"]+)" data-event="([^"]+)"`)
	nextAudit   = regexp.MustCompile(`href="(/audit\?[^"]*cursor=[^"]+)" data-testid="load-more"`)
	auditEntity = regexp.MustCompile(`href="([^"]+)" data-testid="audit-entity"`)
)

// The audit log: labels in the user's language, filters by event, user, entity and date,
// keyset pages, CSV export, admins only, one organization's events only.
func TestAuditLog(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		tn := a.tenant("Biuro Audyt")
		other := a.tenant("Biuro Obce")
		ctx := t.Context()
		if err := db.Conn(ctx).Model(&models.Organization{}).Where("id = ?", tn.org).Update("default_language", "pl").Error; err != nil {
			t.Fatal(err)
		}
		// 60 more events of the same second, to page through.
		err := db.Tx(ctx, func(tx *gorm.DB) error {
			at := time.Now().UTC().Truncate(time.Second)
			for i := range 60 {
				if err := audit.Record(tx, audit.Entry{OrganizationID: tn.org, Actor: audit.System, Action: "dlq.expired",
					EntityType: "dead_letter_queue", EntityID: models.NewID(), At: at, Details: map[string]any{"n": i}}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		c, _ := a.browser(tn)
		get := func(q string) resp {
			t.Helper()
			return do(t, c, "GET", a.srv.URL+"/audit"+q, "", nil)
		}
		events := func(body string) []string {
			var out []string
			for _, m := range auditRow.FindAllStringSubmatch(body, -1) {
				out = append(out, m[2])
			}
			return out
		}

		// Every event of the organization, newest first, 50 a page, then the rest.
		r := get("")
		if r.status != http.StatusOK || !strings.Contains(r.body, `<html lang="pl">`) {
			t.Fatalf("audit page: %d %.300s", r.status, r.body)
		}
		// The log is a section of the settings: their tab, not an item of the top bar.
		doc := parseListDoc(t, r.body)
		if nav, tab := doc.testID("nav-settings"), doc.testID("tab-audit"); len(nav) != 1 || nav[0].attr("aria-current") != "page" ||
			len(tab) != 1 || tab[0].attr("aria-current") != "page" || tab[0].attr("href") != "/audit" || len(doc.testID("nav-audit")) != 0 {
			t.Errorf("the audit log's place: nav %d, tab %d, top-bar item %d", len(nav), len(tab), len(doc.testID("nav-audit")))
		}
		first := auditRow.FindAllStringSubmatch(r.body, -1)
		m := nextAudit.FindStringSubmatch(r.body)
		if len(first) != 50 || m == nil {
			t.Fatalf("first page: %d rows, next %v", len(first), m)
		}
		r2 := do(t, c, "GET", a.srv.URL+strings.ReplaceAll(m[1], "&amp;", "&"), "", nil)
		second := auditRow.FindAllStringSubmatch(r2.body, -1)
		seen := map[string]bool{}
		for _, row := range append(first, second...) {
			if seen[row[1]] {
				t.Fatalf("event %s on two pages", row[1])
			}
			seen[row[1]] = true
		}
		var total int64
		db.Conn(ctx).Model(&models.AuditEntry{}).Where("organization_id = ?", tn.org).Count(&total)
		if int64(len(seen)) != total || nextAudit.MatchString(r2.body) {
			t.Fatalf("pages hold %d events, the organization has %d", len(seen), total)
		}

		// By event, with its Polish label and a link to the execution.
		r = get("?event=execution.started")
		if ev := events(r.body); len(ev) != 1 || ev[0] != "execution.started" || !strings.Contains(r.body, "Uruchomiono wykonanie") {
			t.Fatalf("event filter: %v", ev)
		}
		if l := auditEntity.FindStringSubmatch(r.body); l == nil || l[1] != "/executions/"+tn.execID {
			t.Fatalf("entity link: %v", l)
		}
		// By who: the engine; by entity; by date.
		if ev := events(get("?actor=system&entityType=workflow_execution&entityId=" + tn.execID).body); len(ev) != 1 {
			t.Fatalf("actor+entity filter: %v", ev)
		}
		if ev := events(get("?actor=" + url.QueryEscape(models.NewID())).body); len(ev) != 0 {
			t.Fatalf("nobody's events: %v", ev)
		}
		tomorrow := time.Now().Add(48 * time.Hour).Format("2006-01-02")
		if ev := events(get("?from=" + tomorrow).body); len(ev) != 0 {
			t.Fatalf("events from %s: %v", tomorrow, ev)
		}
		if ev := events(get("?to=" + time.Now().AddDate(0, 0, -3).Format("2006-01-02")).body); len(ev) != 0 {
			t.Fatalf("events three days ago: %v", ev)
		}
		if r := get("?from=2026-11-20&to=2026-11-10"); r.status != http.StatusUnprocessableEntity || !strings.Contains(r.body, "nie może być przed") {
			t.Fatalf("to before from: %d", r.status)
		}
		if r := get("?from=yesterday"); r.status != http.StatusUnprocessableEntity {
			t.Fatalf("from=yesterday: %d", r.status)
		}
		// Another organization's entity: nothing.
		if ev := events(get("?entityId=" + other.execID).body); len(ev) != 0 {
			t.Fatalf("another organization's events: %v", ev)
		}

		// CSV: every matching event, with its label.
		r = do(t, c, "GET", a.srv.URL+"/audit/export.csv?event=dlq.expired", "", nil)
		if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "text/csv") || !strings.Contains(r.header.Get("Content-Disposition"), "attachment") {
			t.Fatalf("export: %d %v", r.status, r.header)
		}
		// Excel on Polish Windows: a UTF-8 byte order mark first, fields separated by ";".
		body, bom := strings.CutPrefix(r.body, "\ufeff")
		if !bom {
			t.Errorf("the export does not start with a UTF-8 byte order mark: %q", r.body[:min(10, len(r.body))])
		}
		cr := csv.NewReader(strings.NewReader(body))
		cr.Comma = ';'
		recs, err := cr.ReadAll()
		if err != nil || len(recs) != 61 || recs[0][1] != "event" || recs[1][1] != "dlq.expired" || recs[1][2] != "Wygasł element DLQ" {
			t.Fatalf("export: %d records, %v, err %v", len(recs), recs[:min(2, len(recs))], err)
		}

		// Admins only.
		if _, err := a.as.CreateUser(ctx, tn.org, "ksiegowa@audyt.example", "correct horse battery", models.RoleAccountant); err != nil {
			t.Fatal(err)
		}
		acc, _ := a.browser(&tenant{email: "ksiegowa@audyt.example", password: "correct horse battery"})
		for _, p := range []string{"/audit", "/audit/export.csv"} {
			if r := do(t, acc, "GET", a.srv.URL+p, "", nil); r.status != http.StatusForbidden {
				t.Errorf("accountant %s: %d", p, r.status)
			}
		}
		if strings.Contains(get("").body, fmt.Sprintf(`data-id="%s"`, other.org)) {
			t.Error("another organization's event listed")
		}
	})
}
