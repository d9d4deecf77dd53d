package handlers_test

import (
	"net/http"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// TestSearchLabelsNameTheInput: the lists' search finds a client's NIP or an invoice number
// in the execution's input (issue 21), and its label says so in the reader's language; it
// said "subject or reason contains", so a new user typing a NIP had no reason to try.
func TestSearchLabelsNameTheInput(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		rs := a.recoverySetup("Biuro Etykiety Szukania")
		acc, _ := a.browser(rs.accountant)
		for _, c := range []struct{ path, input, lang, want string }{
			{"/dlq/items", "filter-dlq-q", "pl", "NIP"},
			{"/executions", "filter-q", "pl", "NIP"},
			{"/dlq/items", "filter-dlq-q", "en", "NIP"},
			{"/executions", "filter-q", "en", "invoice"},
		} {
			r := do(t, acc, "GET", a.srv.URL+c.path, "", map[string]string{"Accept-Language": c.lang})
			if r.status != http.StatusOK {
				t.Fatalf("%s: %d", c.path, r.status)
			}
			doc := parseListDoc(t, r.body)
			labels := doc.all(func(n *html.Node) bool {
				return n.Type == html.ElementNode && n.Data == "label" && listAttr(n, "for") == c.input
			})
			if len(labels) != 1 {
				t.Fatalf("%s (%s): %d labels for #%s", c.path, c.lang, len(labels), c.input)
			}
			if txt := (listDoc{root: labels[0]}).text(); !strings.Contains(txt, c.want) {
				t.Errorf("%s (%s): the search's label %q does not name the input's values (%s)", c.path, c.lang, txt, c.want)
			}
		}
	})
}
