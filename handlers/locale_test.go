package handlers_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// The page language follows the user's choice, else the organization's default, else the
// browser's Accept-Language; the switch in the header saves the choice.
func TestLanguage(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		tn := a.tenant("Biuro Nowak")
		anon := http.DefaultClient

		r := do(t, anon, "GET", a.srv.URL+"/login", "", map[string]string{"Accept-Language": "pl-PL,pl;q=0.9,en;q=0.5"})
		if !strings.Contains(r.body, `<html lang="pl">`) || !strings.Contains(r.body, "Przejdź do treści") {
			t.Fatalf("login page with Accept-Language pl is not Polish: %.400s", r.body)
		}
		r = do(t, anon, "GET", a.srv.URL+"/login", "", map[string]string{"Accept-Language": "de-DE"})
		if !strings.Contains(r.body, `<html lang="en">`) {
			t.Fatalf("login page with Accept-Language de is not English: %.400s", r.body)
		}

		c, csrf := a.browser(tn)
		page := func(accept string) string {
			t.Helper()
			return do(t, c, "GET", a.srv.URL+"/workflows", "", map[string]string{"Accept-Language": accept}).body
		}
		if body := page("pl"); !strings.Contains(body, `<html lang="pl">`) || !strings.Contains(body, "Przepływy") {
			t.Fatalf("no preference: Accept-Language pl should give Polish: %.600s", body)
		}
		// The organization's default wins over the browser.
		if err := db.Conn(t.Context()).Model(&models.Organization{}).Where("id = ?", tn.org).Update("default_language", "pl").Error; err != nil {
			t.Fatal(err)
		}
		if body := page("en-US"); !strings.Contains(body, `<html lang="pl">`) {
			t.Fatalf("organization default pl: the page is not Polish: %.300s", body)
		}
		// The user's own choice wins over both; the switch keeps the page.
		form := url.Values{"lang": {"en"}, "next": {"/executions?status=RUNNING"}, "_csrf": {csrf}}
		r = do(t, c, "POST", a.srv.URL+"/settings/language", form.Encode(), map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/executions?status=RUNNING" {
			t.Fatalf("switch: %d %q %s", r.status, r.header.Get("Location"), r.body)
		}
		if body := page("pl"); !strings.Contains(body, `<html lang="en">`) || !strings.Contains(body, ">Workflows </a>") {
			t.Fatalf("the user chose English: %.600s", body)
		}
		var u models.User
		if err := db.Conn(t.Context()).Where("email = ?", tn.email).First(&u).Error; err != nil || u.Language == nil || *u.Language != "en" {
			t.Fatalf("saved language: %v %v", u.Language, err)
		}
		// Only Polish and English, and no redirect elsewhere.
		form = url.Values{"lang": {"de"}, "_csrf": {csrf}}
		if r := do(t, c, "POST", a.srv.URL+"/settings/language", form.Encode(), map[string]string{"Content-Type": "application/x-www-form-urlencoded"}); r.status != http.StatusUnprocessableEntity {
			t.Fatalf("lang=de: %d", r.status)
		}
		form = url.Values{"lang": {"pl"}, "next": {"//evil.example/"}, "_csrf": {csrf}}
		if r := do(t, c, "POST", a.srv.URL+"/settings/language", form.Encode(), map[string]string{"Content-Type": "application/x-www-form-urlencoded"}); r.header.Get("Location") != "/" {
			t.Fatalf("next=//evil.example: went to %q", r.header.Get("Location"))
		}
	})
}

// The API keeps its machine codes and says its messages in the language the request's
// Accept-Language names, over the saved preferences.
func TestAPIMessagesInRequestLanguage(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		tn := a.tenant("Biuro Lis")
		if err := db.Conn(t.Context()).Model(&models.Organization{}).Where("id = ?", tn.org).Update("default_language", "pl").Error; err != nil {
			t.Fatal(err)
		}
		start := func(lang string) map[string]any {
			t.Helper()
			h := bearer(tn.token)
			h["Content-Type"] = "application/json"
			if lang != "" {
				h["Accept-Language"] = lang
			}
			r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows/"+tn.wfID+"/executions", `{"input": [1, 2]}`, h)
			if r.status != http.StatusUnprocessableEntity {
				t.Fatalf("%s: %d %s", lang, r.status, r.body)
			}
			return r.json(t)["error"].(map[string]any)
		}
		for _, c := range []struct{ lang, message, field string }{
			{"en-GB,en;q=0.9", "The input must be a JSON object.", "must be a JSON object"},
			{"pl", "Dane wejściowe muszą być obiektem JSON.", "musi być obiektem JSON"},
			{"de", "Dane wejściowe muszą być obiektem JSON.", "musi być obiektem JSON"}, // neither: the organization's Polish
		} {
			e := start(c.lang)
			fields, _ := e["fields"].(map[string]any)
			if e["code"] != "invalid" || e["message"] != c.message || !strings.Contains(fmt.Sprint(fields["input"]), c.field) {
				t.Errorf("Accept-Language %q: %v", c.lang, e)
			}
		}
		// A service's own text with values in it: translated by its format.
		h := bearer(tn.token)
		h["Content-Type"], h["Accept-Language"] = "application/json", "pl"
		r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows",
			`{"name": "VAT", "settings": {"retryPolicy": {"maxRetries": 11}}, "steps": [{"id": "a", "type": "transform", "config": {"output": 1}}]}`, h)
		if e, _ := r.json(t)["error"].(map[string]any); r.status != http.StatusUnprocessableEntity || e["message"] != "Definicja przepływu zawiera błędy." ||
			e["fields"].(map[string]any)["settings.retryPolicy.maxRetries"] != "musi być od 0 do 10" {
			t.Errorf("definition errors in Polish: %d %s", r.status, r.body)
		}
		r = do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/executions", "", map[string]string{"Accept-Language": "pl"})
		if e := r.json(t)["error"].(map[string]any); r.status != http.StatusUnauthorized || e["code"] != "unauthorized" || e["message"] != "Wymagane uwierzytelnienie: wyślij Authorization: Bearer <token API>." {
			t.Errorf("anonymous, Polish: %d %v", r.status, e)
		}
	})
}

// A user sets their language and time zone on the profile page; times follow the zone.
func TestProfile(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		tn := a.tenant("Biuro Wrona")
		c, csrf := a.browser(tn)
		r := do(t, c, "GET", a.srv.URL+"/profile", "", nil)
		if r.status != http.StatusOK || !strings.Contains(r.body, `data-testid="profile-form"`) || !strings.Contains(r.body, `href="/profile"`) {
			t.Fatalf("profile page: %d %.300s", r.status, r.body)
		}
		post := func(lang, zone string) resp {
			form := url.Values{"language": {lang}, "timeZone": {zone}, "_csrf": {csrf}}
			return do(t, c, "POST", a.srv.URL+"/profile", form.Encode(), map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
		}
		// Not a time zone: 422 with the field's message, nothing saved.
		r = post("pl", "Europe/Atlantis")
		if r.status != http.StatusUnprocessableEntity || !strings.Contains(r.body, "is not a time zone") {
			t.Fatalf("bad zone: %d %.2000s", r.status, r.body)
		}
		var u models.User
		if err := db.Conn(t.Context()).Where("email = ?", tn.email).First(&u).Error; err != nil || u.Language != nil || u.TimeZone != nil {
			t.Fatalf("a refused form saved something: %v %v %v", u.Language, u.TimeZone, err)
		}
		r = post("pl", "Asia/Tokyo")
		if r.status != http.StatusOK || !strings.Contains(r.body, `<html lang="pl">`) || !strings.Contains(r.body, "Zapisano.") || !strings.Contains(r.body, "Asia/Tokyo") {
			t.Fatalf("save: %d %.600s", r.status, r.body)
		}
		// Times on the pages are in Tokyo time now, with UTC in the tooltip.
		var ex models.Execution
		if err := db.Conn(t.Context()).Where("id = ?", tn.execID).First(&ex).Error; err != nil {
			t.Fatal(err)
		}
		body := do(t, c, "GET", a.srv.URL+"/executions/"+tn.execID, "", nil).body
		tokyo, _ := time.LoadLocation("Asia/Tokyo")
		want := ex.CreatedAt.In(tokyo).Format("15:04")
		if !strings.Contains(body, want) || !strings.Contains(body, ex.CreatedAt.UTC().Format("2006-01-02 15:04:05 UTC")) {
			t.Fatalf("execution page without Tokyo time %s and UTC tooltip: %.300s", want, body)
		}
		// Back to the organization's defaults.
		if r = post("", ""); r.status != http.StatusOK {
			t.Fatalf("reset: %d", r.status)
		}
		if err := db.Conn(t.Context()).Where("email = ?", tn.email).First(&u).Error; err != nil || u.Language != nil || u.TimeZone != nil {
			t.Fatalf("reset saved %v %v %v", u.Language, u.TimeZone, err)
		}
	})
}

// Admins set the organization's default language and time zone; members without their own
// choice follow it; others may not change it.
func TestOrganizationDefaults(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		tn := a.tenant("Biuro Sowa")
		if _, err := a.as.CreateUser(t.Context(), tn.org, "ksiegowa@sowa.example", "correct horse battery", models.RoleAccountant); err != nil {
			t.Fatal(err)
		}
		admin, csrf := a.browser(tn)
		acc, accCSRF := a.browser(&tenant{email: "ksiegowa@sowa.example", password: "correct horse battery"})
		post := func(c *http.Client, token, lang, zone string) resp {
			form := url.Values{"language": {lang}, "timeZone": {zone}, "_csrf": {token}}
			return do(t, c, "POST", a.srv.URL+"/settings/organization", form.Encode(), map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
		}
		if r := post(acc, accCSRF, "pl", "Europe/Warsaw"); r.status != http.StatusForbidden {
			t.Fatalf("accountant: %d", r.status)
		}
		if strings.Contains(do(t, acc, "GET", a.srv.URL+"/profile", "", nil).body, `data-testid="org-form"`) {
			t.Fatal("the accountant's profile offers the organization's form")
		}
		if r := post(admin, csrf, "pl", "Mars/Olympus"); r.status != http.StatusUnprocessableEntity || !strings.Contains(r.body, "is not a time zone") {
			t.Fatalf("bad zone: %d", r.status)
		}
		if r := post(admin, csrf, "pl", "Europe/Warsaw"); r.status != http.StatusOK || !strings.Contains(r.body, `data-testid="org-saved"`) {
			t.Fatalf("save: %d %.300s", r.status, r.body)
		}
		if body := do(t, acc, "GET", a.srv.URL+"/workflows", "", map[string]string{"Accept-Language": "en"}).body; !strings.Contains(body, `<html lang="pl">`) {
			t.Fatal("a member without a choice does not follow the organization's Polish")
		}
		r := do(t, admin, "GET", a.srv.URL+"/audit?event=organization.updated", "", nil)
		if !strings.Contains(r.body, `data-event="organization.updated"`) || !strings.Contains(r.body, "Zmieniono ustawienia organizacji") {
			t.Fatalf("audit: %.300s", r.body)
		}
	})
}

// Relative times in each language: a dead letter expires "za 30 dni" / "in 30 days".
func TestRelativeTimes(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		tn := a.tenant("Biuro Czas")
		c, _ := a.browser(tn)
		for lang, want := range map[string]string{"pl": "za 30 dni", "en": "in 30 days"} {
			if body := do(t, c, "GET", a.srv.URL+"/dlq/items", "", map[string]string{"Accept-Language": lang}).body; !strings.Contains(body, want) {
				t.Errorf("%s: the dead letter's expiry does not say %q", lang, want)
			}
		}
	})
}
