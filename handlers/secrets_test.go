package handlers_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// Point 9: only admins see secret values of definitions; viewers and accountants see them
// masked, on the workflow page and in the API.
func TestDefinitionSecretsAreMaskedBelowAdmin(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		tn := a.tenant("Biuro Sekret")
		ctx := context.Background()
		def := fmt.Sprintf(`{"name": "Bank", "steps": [{"id": "pull", "type": "http", "config": {"method": "GET",
		  "url": "%s/ok?api_key=QUERYSECRET99&page=2", "headers": {"Authorization": "Bearer LITERAL-SECRET-123", "Accept": "application/json"},
		  "body": {"client": {"password": "NESTED-PASS-456"}}}}]}`, a.ext.URL)
		r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows", def, bearer(tn.token))
		if r.status != 201 {
			t.Fatalf("create: %d %s", r.status, r.body)
		}
		wfID := r.json(t)["id"].(string)
		secretsIn := func(body string) []string {
			var found []string
			for _, s := range []string{"QUERYSECRET99", "LITERAL-SECRET-123", "NESTED-PASS-456"} {
				if strings.Contains(body, s) {
					found = append(found, s)
				}
			}
			return found
		}
		for _, role := range []string{models.RoleViewer, models.RoleAccountant, models.RoleAdmin} {
			tok, _, err := a.as.CreateToken(ctx, tn.org, role, role)
			if err != nil {
				t.Fatal(err)
			}
			email := role + "@sekret.example"
			if _, err := a.as.CreateUser(ctx, tn.org, email, tn.password, role); err != nil {
				t.Fatal(err)
			}
			user := *tn
			user.email = email
			browser, _ := a.browser(&user)
			views := map[string]string{
				"API workflow": do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/workflows/"+wfID, "", bearer(tok)).body,
				"API list":     do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/workflows", "", bearer(tok)).body,
				"page":         do(t, browser, "GET", a.srv.URL+"/workflows/"+wfID, "", nil).body,
			}
			for name, body := range views {
				found := secretsIn(body)
				if role == models.RoleAdmin && len(found) != 3 {
					t.Errorf("%s as admin shows %v, want every secret", name, found)
				}
				if role != models.RoleAdmin && len(found) > 0 {
					t.Errorf("%s as %s shows %v", name, role, found)
				}
				if role != models.RoleAdmin && !strings.Contains(body, "application/json") {
					t.Errorf("%s as %s lost the non-secret values: %.300s", name, role, body)
				}
			}
		}
	})
}

// echoService fails every call with 500 and echoes what it was sent (credentials too), as a
// careless upstream does.
type echoService struct {
	mu   sync.Mutex
	auth []string
}

func (e *echoService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	e.auth = append(e.auth, r.Header.Get("Authorization"))
	e.mu.Unlock()
	w.WriteHeader(http.StatusInternalServerError)
	fmt.Fprintf(w, `{"error": "cannot post", "url": %q, "authorization": %q}`, r.URL.String(), r.Header.Get("Authorization"))
}

// Point 9: a canary secret put through a failing execution is found nowhere in clear text:
// not in the database (every row of every table, and the SQLite files' bytes), not in the
// log, not on a page, not in the API. The step still sent it.
func TestCanarySecretIsNowhereInClear(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		var logBuf syncBuffer
		a := newAppWith(t, db, &logBuf)
		tn := a.tenant("Biuro Kanarek")
		echo := &echoService{}
		up := httptest.NewServer(echo)
		defer up.Close()
		const token, key = "CANARY-TOKEN-7f3a9", "CANARYKEY51c2"
		def := fmt.Sprintf(`{"name": "Canary", "settings": {"retryPolicy": {"maxRetries": 1, "initialDelayMs": 1000}},
		  "steps": [{"id": "post", "type": "http", "config": {"method": "POST", "url": "%s/post?api_key={{ input.apiKey }}&page=1",
		    "headers": {"Authorization": "Bearer {{ input.apiToken }}", "X-Api-Key": "DEFCANARY-99"}, "body": {"nip": "{{ input.nip }}", "password": "{{ input.apiToken }}"}}}]}`, up.URL)
		r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows", def, bearer(tn.token))
		if r.status != 201 {
			t.Fatalf("create: %d %s", r.status, r.body)
		}
		wfID := r.json(t)["id"].(string)
		r = do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows/"+wfID+"/executions",
			fmt.Sprintf(`{"input": {"apiToken": %q, "apiKey": %q, "nip": "5260250274"}}`, token, key), bearer(tn.token))
		if r.status != 201 {
			t.Fatalf("start: %d %s", r.status, r.body)
		}
		execID := r.json(t)["id"].(string)
		deadline := time.Now().Add(30 * time.Second)
		var ex models.Execution
		for {
			if err := db.Conn(context.Background()).First(&ex, "id = ?", execID).Error; err != nil {
				t.Fatal(err)
			}
			if ex.Status == models.ExecDLQPending {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("execution still %s", ex.Status)
			}
			time.Sleep(50 * time.Millisecond)
		}
		echo.mu.Lock()
		sent := append([]string(nil), echo.auth...)
		echo.mu.Unlock()
		if len(sent) != 2 || sent[0] != "Bearer "+token {
			t.Fatalf("the step sent %q: it must decrypt the secret in memory and send it", sent)
		}

		leaks := func(where, text string) {
			t.Helper()
			for _, s := range []string{token, key} {
				if strings.Contains(text, s) {
					i := strings.Index(text, s)
					t.Errorf("%s shows %s in clear: …%s…", where, s, text[max(0, i-80):min(len(text), i+40)])
				}
			}
		}
		dump := dumpDatabase(t, db)
		if db.Dialect == models.SQLite {
			dump += sqliteFiles(t, db)
		}
		leaks("database", dump)
		// A secret written into the definition itself is encrypted at rest too (admins
		// still read it on the workflow page: it is theirs).
		if strings.Contains(dump, "DEFCANARY-99") {
			t.Error("the definition's literal secret is stored in clear")
		}
		if r := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/workflows/"+wfID, "", bearer(tn.token)); !strings.Contains(r.body, "DEFCANARY-99") {
			t.Errorf("admins must read the definition's secret: %.300s", r.body)
		}
		dl := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/dlq?status=pending", "", bearer(tn.token))
		browser, _ := a.browser(tn)
		for _, p := range []string{"/executions", "/executions/" + execID, "/dlq", "/workflows/" + wfID} {
			leaks("page "+p, do(t, browser, "GET", a.srv.URL+p, "", nil).body)
		}
		for _, p := range []string{"/api/v1/executions", "/api/v1/executions/" + execID, "/api/v1/dlq", "/api/v1/workflows/" + wfID} {
			leaks("API "+p, do(t, http.DefaultClient, "GET", a.srv.URL+p, "", bearer(tn.token)).body)
		}
		for _, it := range dl.json(t)["items"].([]any) {
			id := it.(map[string]any)["id"].(string)
			leaks("page /dlq/"+id, do(t, browser, "GET", a.srv.URL+"/dlq/"+id, "", nil).body)
			leaks("API /api/v1/dlq/"+id, do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/dlq/"+id, "", bearer(tn.token)).body)
		}
		leaks("log", logBuf.String())
		// The error a person reads is still useful: the upstream status and the masked URL.
		var a1 models.StepAttempt
		db.Conn(context.Background()).Where("execution_id = ?", execID).Order("attempt").First(&a1)
		if a1.StackTrace == nil || !strings.Contains(*a1.StackTrace, "api_key=[REDACTED]") || !strings.Contains(*a1.StackTrace, "HTTP 500") {
			t.Errorf("trace %v", a1.StackTrace)
		}
	})
}

// dumpDatabase returns every row of every table as text.
func dumpDatabase(t *testing.T, db *models.DB) string {
	t.Helper()
	ctx := context.Background()
	var tables []string
	q := "SELECT name FROM sqlite_master WHERE type = 'table'"
	if db.Dialect == models.Postgres {
		q = "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
	}
	if err := db.Conn(ctx).Raw(q).Scan(&tables).Error; err != nil || len(tables) < 10 {
		t.Fatalf("tables %v %v", tables, err)
	}
	var b strings.Builder
	for _, tb := range tables {
		rows, err := db.SQL.QueryContext(ctx, `SELECT * FROM "`+tb+`"`)
		if err != nil {
			t.Fatalf("dump %s: %v", tb, err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			for _, v := range vals {
				switch x := v.(type) {
				case []byte:
					b.Write(x)
				default:
					fmt.Fprint(&b, x)
				}
				b.WriteByte('|')
			}
			b.WriteByte('\n')
		}
		rows.Close()
	}
	return b.String()
}

// sqliteFiles returns the bytes of the SQLite database and its write-ahead log.
func sqliteFiles(t *testing.T, db *models.DB) string {
	t.Helper()
	var file string
	if err := db.Conn(context.Background()).Raw("SELECT file FROM pragma_database_list WHERE name = 'main'").Scan(&file).Error; err != nil || file == "" {
		t.Fatalf("database file: %q %v", file, err)
	}
	var b bytes.Buffer
	for _, p := range []string{file, file + "-wal"} {
		data, err := os.ReadFile(p)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		b.Write(data)
	}
	return b.String()
}

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
