package handlers_test

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/audit"
	"lifeline/views/i18n"
)

// errorOf is the "error" object of an API answer.
func errorOf(t *testing.T, r resp) map[string]any {
	t.Helper()
	e, ok := r.json(t)["error"].(map[string]any)
	if !ok {
		t.Fatalf("no error object (%d): %s", r.status, r.body)
	}
	return e
}

// inBoth sends a request with Accept-Language en and then pl and returns both error objects.
// It fails when the answers differ in status, code or fields, or when a Polish message or
// field message is the English one: a text without a Polish rendering.
func inBoth(t *testing.T, status int, method, u, body string, hdr map[string]string) (en, pl map[string]any) {
	t.Helper()
	answer := func(lang string) map[string]any {
		t.Helper()
		h := map[string]string{"Accept-Language": lang, "Content-Type": "application/json"}
		maps.Copy(h, hdr)
		r := do(t, http.DefaultClient, method, u, body, h)
		if r.status != status {
			t.Fatalf("%s %s (%s): %d, want %d: %s", method, u, lang, r.status, status, r.body)
		}
		return errorOf(t, r)
	}
	en, pl = answer("en"), answer("pl")
	if en["code"] != pl["code"] {
		t.Errorf("%s %s: code %v in English, %v in Polish", method, u, en["code"], pl["code"])
	}
	if en["message"] == pl["message"] {
		t.Errorf("%s %s: the message is English in Polish: %q", method, u, pl["message"])
	}
	enF, _ := en["fields"].(map[string]any)
	plF, _ := pl["fields"].(map[string]any)
	for _, k := range slices.Sorted(maps.Keys(enF)) {
		if _, ok := plF[k]; !ok {
			t.Errorf("%s %s: field %s only in English", method, u, k)
		} else if enF[k] == plF[k] {
			t.Errorf("%s %s: field %s is English in Polish: %q", method, u, k, plF[k])
		}
	}
	if len(plF) != len(enF) {
		t.Errorf("%s %s: fields %v in English, %v in Polish", method, u, slices.Sorted(maps.Keys(enF)), slices.Sorted(maps.Keys(plF)))
	}
	return en, pl
}

// wantFields fails unless e has every one of keys among its fields (so that the request
// reached the validators it is meant to).
func wantFields(t *testing.T, e map[string]any, keys ...string) {
	t.Helper()
	f, _ := e["fields"].(map[string]any)
	for _, k := range keys {
		if _, ok := f[k]; !ok {
			t.Errorf("no field %s in %v", k, slices.Sorted(maps.Keys(f)))
		}
	}
}

// A Polish request gets every validation message in Polish: a workflow definition's
// handler steps, on-failure rules, compensations (under both spellings of their keys), step
// configs and circuit breaker, a replay from a handler step, API tokens that are unknown,
// revoked or expired, a reserved Idempotency-Key, things not found and a URL the server does
// not have. Each request goes in English and in Polish; no Polish text may be the English.
func TestPolishValidationMessages(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		tn := a.tenant("Biuro Tłumaczeń")
		api := a.srv.URL + "/api/v1"
		auth := bearer(tn.token)

		// Definitions: one with a problem in almost every part the validators check.
		defs := []struct {
			name, body string
			fields     []string
		}{
			{"handlers and compensations (Lifeline's keys)", `{"name": "Błędy", "settings": {"onFailure": {"handlerStepId": "h", "default": "h"}, "circuitBreaker": {"scope": "zone"}},
			  "steps": [
			    {"id": "a", "type": "http", "config": {"url": "ftp://bank.example/x", "headers": {"X Bad": "v", "X-N": 1}, "timeoutMs": 5}, "next": "h",
			     "onFailure": {"byErrorType": {"flaky": "h", "validation": "b"}}},
			    {"id": "b", "type": "delay", "config": {"ms": 0}, "compensation": {"compensationType": "api_call", "config": {"url": "ftp://x", "method": "FETCH"}}},
			    {"id": "c", "type": "transform", "config": {"output": 1}, "compensation": {"compensationType": "database_operation", "config": {"statement": "UPDATE t SET a = {{ input.x }}", "params": "x"}}},
			    {"id": "d", "type": "transform", "config": {"output": 1}, "compensation": {"compensationType": "notification", "config": {"message": " "}}},
			    {"id": "e", "type": "transform", "config": {"output": 1}, "compensation": {"compensationType": "manual", "config": {}}},
			    {"id": "f", "type": "http", "config": {"url": "bank.example/{{ input.host }}", "headers": "x"}, "compensation": {"compensationType": "api_call", "config": {"url": "bank.example/{{ input.id }}"}}},
			    {"id": "h", "type": "transform", "config": {"output": 1}, "handler": true, "next": "zz", "onFailure": {"default": "h"}, "compensation": {"compensationType": "none"}},
			    {"id": "h2", "type": "transform", "config": {"output": 1}, "handler": true, "next": "h"},
			    {"id": "g", "type": "http", "config": {"url": "https://bank.example/x"}, "compensation": {"compensationType": "refund"}}
			  ]}`,
				[]string{"settings.onFailure.default", "settings.circuitBreaker.scope", "steps[0].next", "steps[0].onFailure.byErrorType.flaky",
					"steps[0].onFailure.byErrorType.validation", "steps[0].config.url", "steps[0].config.headers.X Bad", "steps[0].config.headers.X-N",
					"steps[0].config.timeoutMs", "steps[1].config.ms", "steps[1].compensation.config.url", "steps[1].compensation.config.method",
					"steps[2].compensation.config.connection", "steps[2].compensation.config.statement", "steps[2].compensation.config.params",
					"steps[3].compensation.config.message", "steps[4].compensation.config.instructions", "steps[5].config.url", "steps[5].config.headers",
					"steps[5].compensation.config.url", "steps[6].onFailure", "steps[6].compensation", "steps[6].next", "steps[7].next",
					"steps[8].compensation.compensationType"}},
			{"compensations (seed 000's keys)", `{"name": "Kompensacje", "steps": [
			    {"id": "a", "type": "transform", "config": {"output": 1}, "compensation": {"compensationType": "api_call", "config": {"endpoint": ""}}},
			    {"id": "b", "type": "transform", "config": {"output": 1}, "compensation": {"compensationType": "database_operation", "config": {"connection": "ksiegi", "sqlTemplate": ""}}},
			    {"id": "c", "type": "transform", "config": {"output": 1}, "compensation": {"compensationType": "notification", "config": {}}},
			    {"id": "d", "type": "transform", "config": {"output": 1}, "compensation": {"compensationType": "api_call", "config": {"endpoint": "https://x/{{ steps.zz.output }}"}}}
			  ]}`,
				[]string{"steps[0].compensation.config.endpoint", "steps[1].compensation.config.sqlTemplate", "steps[2].compensation.config.notificationTemplate"}},
			{"only handler steps", `{"name": "Same obsługi", "settings": {"subject": "{{ steps.a.output }}"}, "steps": [{"id": "a", "type": "transform", "config": {"output": 1}, "handler": true}]}`,
				[]string{"steps", "settings.subject"}},
			{"a type error", `{"name": "Zły typ", "steps": "a"}`, []string{"definition"}},
			{"a NUL character", `{"name": "NUL", "steps": [{"id": "a", "type": "transform", "config": {"output": "a\u0000b"}}]}`, []string{"steps[0].config.output"}},
		}
		for _, d := range defs {
			t.Run(d.name, func(t *testing.T) {
				_, pl := inBoth(t, http.StatusUnprocessableEntity, "POST", api+"/workflows", d.body, auth)
				wantFields(t, pl, d.fields...)
			})
		}

		// A replay from a handler step.
		hdef := fmt.Sprintf(`{"name": "Z krokiem obsługi", "settings": {"retryPolicy": {"maxRetries": 0}}, "steps": [
		    {"id": "task", "type": "transform", "config": {"output": 1}, "handler": true},
		    {"id": "submit", "type": "http", "config": {"method": "POST", "url": "%s/bad"}}]}`, a.ext.URL)
		r := do(t, http.DefaultClient, "POST", api+"/workflows", hdef, auth)
		if r.status != http.StatusCreated {
			t.Fatalf("workflow with a handler step: %d %s", r.status, r.body)
		}
		wfID := r.json(t)["id"].(string)
		r = do(t, http.DefaultClient, "POST", api+"/workflows/"+wfID+"/executions", `{"input": {}}`, auth)
		exID, _ := r.json(t)["id"].(string)
		var dlqID string
		for deadline := time.Now().Add(20 * time.Second); dlqID == "" && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			dlqID, _ = do(t, http.DefaultClient, "GET", api+"/executions/"+exID, "", auth).json(t)["dlqId"].(string)
		}
		if dlqID == "" {
			t.Fatal("the failing execution reached no dead letter")
		}
		_, pl := inBoth(t, http.StatusUnprocessableEntity, "POST", api+"/dlq/"+dlqID+"/actions", `{"action": "retry", "fromStepId": "task"}`, auth)
		wantFields(t, pl, "fromStepId")

		// A reserved Idempotency-Key.
		inBoth(t, http.StatusUnprocessableEntity, "POST", api+"/workflows/"+tn.wfID+"/executions", `{"input": {}}`,
			map[string]string{"Authorization": "Bearer " + tn.token, "Idempotency-Key": "webhook:abc"})

		// API tokens: unknown, revoked, expired.
		ctx := t.Context()
		revoked, rt, err := a.as.CreateToken(ctx, tn.org, models.RoleAdmin, "stary")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.as.RevokeToken(ctx, tn.org, rt.ID, audit.System); err != nil {
			t.Fatal(err)
		}
		expired, et, err := a.as.CreateToken(ctx, tn.org, models.RoleAdmin, "wygasły")
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Conn(ctx).Model(&models.APIToken{}).Where("id = ?", et.ID).Update("expires_at", time.Now().Add(-time.Hour)).Error; err != nil {
			t.Fatal(err)
		}
		for _, tok := range []string{"llt_nieznany", "zły", revoked, expired} {
			_, pl := inBoth(t, http.StatusUnauthorized, "GET", api+"/executions", "", bearer(tok))
			if tok == revoked && !strings.HasPrefix(fmt.Sprint(pl["message"]), "Ten token API unieważniono ") {
				t.Errorf("revoked token: %v", pl["message"])
			}
		}

		// Not found, and what the server does not have.
		for _, c := range []struct{ method, path, body string }{
			{"GET", "/dlq/bulk/" + models.NewID(), ""},
			{"POST", "/compensations/" + models.NewID() + "/actions", `{"action": "retry"}`},
			{"GET", "/nothing-here", ""},
		} {
			inBoth(t, http.StatusNotFound, c.method, api+c.path, c.body, auth)
		}

		// The page of an unknown URL, in a Polish session.
		if err := db.Conn(ctx).Model(&models.Organization{}).Where("id = ?", tn.org).Update("default_language", "pl").Error; err != nil {
			t.Fatal(err)
		}
		c, _ := a.browser(tn)
		page := do(t, c, "GET", a.srv.URL+"/nothing-here", "", nil)
		doc := parseListDoc(t, page.body)
		if page.status != http.StatusNotFound || len(doc.testID("error-page")) != 1 {
			t.Fatalf("unknown URL: %d %.300s", page.status, page.body)
		}
		if got := doc.byID("error-title"); got == nil || (listDoc{got}).text() != "Nie znaleziono strony" {
			t.Errorf("error title: %v", page.body)
		}
		if msg := doc.testID("error-message"); len(msg) != 1 || msg[0].text() != "Pod tym adresem nic nie ma. Sprawdź, czy adres jest poprawny." {
			t.Errorf("error message: %v", page.body)
		}
		if strings.Contains(page.body, "Not Found") {
			t.Error("the Polish 404 page says Not Found")
		}
	})
}

// The notification settings, the delivery log and the inbox answer in Polish too.
func TestPolishNotificationMessages(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newNotifApp(t, db)
		nt := a.tenant("Biuro Powiadomień")
		api := a.srv.URL + "/api/v1/notifications"
		auth := bearer(nt.adminToken)
		for _, body := range []string{
			`{"enabled": "tak", "channels": ["email", "pager"], "recipients": ["role:boss", "nie adres"], "digestThresholdPerMinute": 0, "colour": "red",
			  "slackWebhookUrl": "https://169.254.169.254/latest", "teamsWebhookUrl": "https://example.com/x"}`,
			`{"channels": "email", "recipients": "x", "slackWebhookUrl": 1}`,
			`{"channels": ["slack", "teams"], "slackWebhookUrl": "https://user:pw@hooks.slack.com/x", "teamsWebhookUrl": "http://example.com/x"}`,
			`{"recipients": ["a@b.pl"` + strings.Repeat(`, "a@b.pl"`, 50) + `]}`,
			`[]`,
		} {
			_, pl := inBoth(t, http.StatusUnprocessableEntity, "PUT", api+"/settings", body, auth)
			if len(pl["fields"].(map[string]any)) == 0 {
				t.Errorf("%s: no field messages", body)
			}
		}
		inBoth(t, http.StatusUnprocessableEntity, "POST", api+"/test", `{"channel": "pager"}`, auth)
		inBoth(t, http.StatusUnprocessableEntity, "POST", api+"/test", `{"channel": "email"}`, auth) // a token, not a user
		inBoth(t, http.StatusUnprocessableEntity, "POST", api+"/test", `{"channel": "slack"}`, auth) // no webhook URL saved
		inBoth(t, http.StatusNotFound, "POST", api+"/deliveries/"+models.NewID()+"/resend", "", auth)
		inBoth(t, http.StatusNotFound, "POST", api+"/"+models.NewID()+"/read", "", auth)

		// The audit log links the notification settings and a delivery to their pages.
		if err := db.Tx(t.Context(), func(tx *gorm.DB) error {
			for ev, typ := range map[string]string{"notifications.updated": "notification_settings", "notification.resent": "notification_delivery"} {
				if err := audit.Record(tx, audit.Entry{OrganizationID: nt.org, Action: ev, EntityType: typ, EntityID: models.NewID()}); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		c, _ := a.browser(nt.admin)
		body := do(t, c, "GET", a.srv.URL+"/audit", "", map[string]string{"Accept-Language": "pl"}).body
		for _, want := range []string{"Zmieniono ustawienia powiadomień", "Ustawienia powiadomień", "Zlecono ponowne wysłanie powiadomienia", "Wysyłka powiadomienia"} {
			if !strings.Contains(body, want) {
				t.Errorf("the audit log does not say %q", want)
			}
		}
		links := map[string]bool{}
		for _, m := range auditEntity.FindAllStringSubmatch(body, -1) {
			links[m[1]] = true
		}
		if !links["/settings/notifications"] || !links["/notifications/deliveries"] {
			t.Errorf("notification entries link to %v", slices.Sorted(maps.Keys(links)))
		}
	})
}

// Every event the code may write to the audit log (audit.Events, which Record enforces) has a
// label in both languages and is offered by the page's filter; every entity type has a label
// and, where Lifeline has a page for it, a link.
func TestAuditEventsHaveLabels(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		tn := a.tenant("Biuro Etykiet")
		ctx := t.Context()
		if err := db.Conn(ctx).Model(&models.Organization{}).Where("id = ?", tn.org).Update("default_language", "pl").Error; err != nil {
			t.Fatal(err)
		}
		// Record refuses an event or an entity type the page would not know.
		if err := db.Tx(ctx, func(tx *gorm.DB) error {
			return audit.Record(tx, audit.Entry{OrganizationID: tn.org, Action: "made.up", EntityType: "workflow", EntityID: tn.wfID})
		}); err == nil || !strings.Contains(err.Error(), "made.up") {
			t.Errorf("an unknown event was recorded: %v", err)
		}
		if err := db.Tx(ctx, func(tx *gorm.DB) error {
			return audit.Record(tx, audit.Entry{OrganizationID: tn.org, Action: "workflow.updated", EntityType: "made_up", EntityID: tn.wfID})
		}); err == nil {
			t.Error("an unknown entity type was recorded")
		}

		// One entry of every event, about every entity type in turn.
		events, types := audit.Events(), audit.EntityTypes()
		exec := tn.execID
		ids := map[string]string{}
		err := db.Tx(ctx, func(tx *gorm.DB) error {
			for i, ev := range events {
				typ := types[i%len(types)]
				id := models.NewID()
				ids[typ] = id
				if err := audit.Record(tx, audit.Entry{OrganizationID: tn.org, Actor: audit.System, Action: ev, EntityType: typ, EntityID: id,
					Details: map[string]any{"executionId": exec}}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(events) < len(types) {
			t.Fatalf("%d events cover only some of the %d entity types", len(events), len(types))
		}
		for _, lang := range i18n.Languages {
			l := i18n.New(lang, nil)
			for _, ev := range events {
				if l.T("audit."+ev) == "audit."+ev {
					t.Errorf("event %s has no %s label (message audit.%s)", ev, lang, ev)
				}
			}
			for _, typ := range types {
				if l.T("entity."+typ) == "entity."+typ {
					t.Errorf("entity type %s has no %s label (message entity.%s)", typ, lang, typ)
				}
			}
		}
		c, _ := a.browser(tn)
		// Every page of the log (more events than one page holds), following "older".
		body := do(t, c, "GET", a.srv.URL+"/audit", "", nil).body
		first := body
		labels := map[string]string{}
		for page := 0; page < 20; page++ {
			doc := parseListDoc(t, body)
			for _, row := range doc.testID("audit-row") {
				if l := row.testID("audit-label"); len(l) == 1 {
					labels[row.attr("data-event")] = l[0].text()
				}
			}
			more := doc.testID("load-more")
			if len(more) == 0 {
				break
			}
			body = do(t, c, "GET", a.srv.URL+more[0].attr("href"), "", nil).body
		}
		body = first
		for _, ev := range events {
			if !strings.Contains(body, fmt.Sprintf(`<option value="%s"`, ev)) {
				t.Errorf("the event filter does not offer %s", ev)
			}
			if l, ok := labels[ev]; !ok || l == ev || l != i18n.New("pl", nil).T("audit."+ev) {
				t.Errorf("event %s shows as %q, not by its Polish label", ev, l)
			}
		}
		for _, typ := range types {
			if strings.Contains(body, ">"+typ+"<") {
				t.Errorf("entity type %s shows as its id", typ)
			}
		}
		// Links: to the page of the thing, where there is one (this app has no notifications:
		// TestPolishNotificationMessages checks theirs).
		links := map[string]bool{}
		for _, m := range auditEntity.FindAllStringSubmatch(body, -1) {
			links[m[1]] = true
		}
		for typ, want := range map[string]string{
			"circuit_breaker_state": "/breakers#breaker-" + ids["circuit_breaker_state"],
			"compensation_action":   "/executions/" + exec + "#rollback",
			"db_connection":         "/settings/connections",
			"dlq_bulk_job":          "/dlq/bulk/" + ids["dlq_bulk_job"],
			"organization":          "/profile",
			"workflow":              "/workflows/" + ids["workflow"],
		} {
			if !links[want] {
				t.Errorf("%s: no link to %s among %v", typ, want, slices.Sorted(maps.Keys(links)))
			}
		}
	})
}

// Durations, the backoff multiplier and the jitter are written in the page's number format:
// "1,5 s ×1,5" in Polish, "1.5 s ×1.5" in English; minutes as "1 min 30 s" / "1m 30s".
func TestNumbersInLocale(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		tn := a.tenant("Biuro Liczb")
		def := `{"name": "Liczby", "steps": [{"id": "a", "type": "transform", "timeoutMs": 2500, "config": {"output": 1},
		  "retryPolicy": {"maxRetries": 3, "initialDelayMs": 1500, "backoffMultiplier": 1.5, "jitterRatio": 0.125, "maxDelayMs": 90500}}]}`
		r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows", def, bearer(tn.token))
		if r.status != http.StatusCreated {
			t.Fatalf("create: %d %s", r.status, r.body)
		}
		wfID := r.json(t)["id"].(string)
		c, _ := a.browser(tn)
		for _, lang := range []struct {
			accept          string
			policy, timeout []string
		}{
			{"pl", []string{"3 ponowienia", "1,5 s ×1,5", "maks. 1 min 30 s", "±12,5%"}, []string{"2,5 s"}},
			{"en", []string{"3 retries", "1.5 s ×1.5", "1m 30s", "±12.5%"}, []string{"2.5 s"}},
		} {
			doc := parseListDoc(t, do(t, c, "GET", a.srv.URL+"/workflows/"+wfID, "", map[string]string{"Accept-Language": lang.accept}).body)
			policy, timeout := doc.testID("policy"), doc.testID("timeout")
			if len(policy) != 1 || len(timeout) != 1 {
				t.Fatalf("%s: %d policies, %d timeouts", lang.accept, len(policy), len(timeout))
			}
			for _, want := range lang.policy {
				if !strings.Contains(policy[0].text(), want) {
					t.Errorf("%s: policy %q without %q", lang.accept, policy[0].text(), want)
				}
			}
			for _, want := range lang.timeout {
				if !strings.Contains(timeout[0].text(), want) {
					t.Errorf("%s: timeout %q without %q", lang.accept, timeout[0].text(), want)
				}
			}
		}
	})
}
