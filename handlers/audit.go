package handlers

import (
	"cmp"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"lifeline/models"
	"lifeline/services/audit"
	"lifeline/views/i18n"
	"lifeline/views/pages"
)

// auditStore is what the audit log page needs (audit.Reader).
type auditStore interface {
	List(ctx context.Context, orgID string, f models.AuditFilter) ([]models.AuditRow, string, error)
	Members(ctx context.Context, orgID string) ([]models.Member, error)
	EntityTypes(ctx context.Context, orgID string) ([]string, error)
}

var _ auditStore = (*audit.Reader)(nil)

// AuditHandler serves the admins' audit log: filters, pages and a CSV export.
type AuditHandler struct {
	*chrome
	store auditStore
}

// newAuditHandler returns the handler.
func newAuditHandler(ch *chrome, store auditStore) *AuditHandler {
	return &AuditHandler{chrome: ch, store: store}
}

// auditEvents are the events the filter offers: every event the code writes.
func auditEvents() []string {
	out := audit.Events()
	sort.Strings(out)
	return out
}

// filter reads the query (listQuery: every key checked before the query runs). Dates are
// days in the user's time zone; To includes its day. The actor is a user's id or
// "system"; the entity type a machine name; the entity id at most 100 characters of text.
func (h *AuditHandler) filter(c echo.Context) (models.AuditFilter, pages.AuditFilter, error) {
	q := newListQuery(c)
	f := models.AuditFilter{Action: q.oneOf("event", auditEvents()), EntityType: q.name("entityType"), Cursor: q.get("cursor")}
	if actor, ok := q.text("actor", 36, "audit.error.actor"); ok && actor != "system" && actor != "" && !isUUID(actor) {
		q.fail("actor", "audit.error.actor")
	} else {
		f.Actor = actor
	}
	f.EntityID, _ = q.text("entityId", maxEntityID, "audit.error.entityid", "Max", maxEntityID)
	f.From, f.To = q.days("audit.error.range")
	vf := pages.AuditFilter{Action: h.url("audit"), Event: q.shown("event"), Actor: q.shown("actor"), EntityType: q.shown("entityType"),
		EntityID: q.shown("entityId"), From: q.shown("from"), To: q.shown("to"), Errors: q.fields}
	return f, vf, q.err()
}

// maxEntityID is the longest entity id the audit log stores (audit_log.entity_id).
const maxEntityID = 100

// List renders a page of the audit log; a filter that is not valid answers 422 with the
// form and a message per key.
func (h *AuditHandler) List(c echo.Context) error {
	p, l, ctx := principal(c), localizer(c), c.Request().Context()
	f, vf, ferr := h.filter(c)
	vm := pages.AuditVM{Filter: vf, Filtered: vf.Event != "" || vf.Actor != "" || vf.EntityType != "" || vf.EntityID != "" || vf.From != "" || vf.To != ""}
	status := http.StatusOK
	var rows []models.AuditRow
	var next string
	if ferr == nil { // a cursor this server did not make is EINVALID too, shown as the filter's
		rows, next, ferr = h.store.List(ctx, p.OrganizationID, f)
	}
	if me := invalid(ferr); me != nil {
		status = http.StatusUnprocessableEntity
		vm.Error, vm.Filter.Errors = translated(l, me.Message, me.Fields)
	} else if ferr != nil {
		return ferr
	} else {
		for _, r := range rows {
			vm.Rows = append(vm.Rows, auditRow(h.links, l, r))
		}
		if next != "" {
			vm.NextURL = h.url("audit") + "?" + withParam(c.QueryParams(), "cursor", next)
		}
		vm.ExportURL = h.url("audit.export") + "?" + withParam(c.QueryParams(), "cursor", "")
	}
	if err := h.options(c, &vm.Filter); err != nil {
		return err
	}
	return render(c, status, pages.Audit(h.page(c, "nav.audit", "audit"), vm))
}

// options fills the filter's choices.
func (h *AuditHandler) options(c echo.Context, vf *pages.AuditFilter) error {
	p, l, ctx := principal(c), localizer(c), c.Request().Context()
	vf.Events = options(auditEvents(), vf.Event, func(e string) string { return l.TOr("audit."+e, e) })
	members, err := h.store.Members(ctx, p.OrganizationID)
	if err != nil {
		return err
	}
	vf.Actors = []pages.Option{{Value: "system", Label: l.T("audit.actor.system"), Selected: vf.Actor == "system"}}
	for _, m := range members {
		vf.Actors = append(vf.Actors, pages.Option{Value: m.UserID, Label: m.Email, Selected: vf.Actor == m.UserID})
	}
	types, err := h.store.EntityTypes(ctx, p.OrganizationID)
	if err != nil {
		return err
	}
	vf.EntityTypes = options(types, vf.EntityType, func(t string) string { return l.TOr("entity."+t, t) })
	return nil
}

// Export answers every entry the filter matches as CSV (UTC times, labels in the user's
// language), newest first, in pages so that memory stays flat. It starts with a UTF-8 byte
// order mark and separates fields as the user's spreadsheet expects: Excel on Polish Windows
// reads ą, ę, ł right only after the mark, and splits on ";" (the decimal separator there is
// the comma).
func (h *AuditHandler) Export(c echo.Context) error {
	p, l, ctx := principal(c), localizer(c), c.Request().Context()
	f, _, err := h.filter(c)
	if invalid(err) != nil { // the page says what to fix
		return h.List(c)
	}
	w := c.Response()
	w.Header().Set(echo.HeaderContentType, "text/csv; charset=utf-8")
	w.Header().Set(echo.HeaderContentDisposition, fmt.Sprintf(`attachment; filename="audit-%s.csv"`, time.Now().UTC().Format("2006-01-02")))
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, "\ufeff")
	cw := csv.NewWriter(w)
	cw.Comma = csvSeparator(l.Lang())
	_ = cw.Write([]string{"time_utc", "event", "label", "actor_type", "actor", "entity_type", "entity_id", "details"})
	f.Limit, f.Cursor = 1000, ""
	for {
		rows, next, err := h.store.List(ctx, p.OrganizationID, f)
		if err != nil {
			h.log.Error("audit export stopped", "err", err)
			break
		}
		for _, r := range rows {
			v := auditRow(h.links, l, r)
			_ = cw.Write([]string{r.CreatedAt.UTC().Format(time.RFC3339), r.Action, v.Label, r.ActorType, v.Actor, r.EntityType, r.EntityID, string(r.Details)})
		}
		cw.Flush()
		if next == "" || cw.Error() != nil {
			break
		}
		f.Cursor = next
	}
	return nil
}

// csvSeparator is the field separator of a CSV for a language's spreadsheets: ";" where the
// comma is the decimal separator (Polish), else ",".
func csvSeparator(lang string) rune {
	if lang == "pl" {
		return ';'
	}
	return ','
}

// auditRow is one entry for display: its label, who, what it says in a line, its details,
// and a link to what it is about.
func auditRow(lk links, l *i18n.Localizer, r models.AuditRow) pages.AuditRow {
	v := pages.AuditRow{ID: r.ID, Event: r.Action, Label: l.TOr("audit."+r.Action, r.Action), EntityType: r.EntityType,
		EntityLabel: l.TOr("entity."+r.EntityType, r.EntityType), EntityID: r.EntityID,
		At: rfc(r.CreatedAt), AtText: l.TimeSec(r.CreatedAt)}
	details := detailsOf(r.Details)
	v.Note = auditNote(l, details)
	if d := string(r.Details); d != "{}" && d != "null" {
		v.Details = d
	}
	switch r.ActorType {
	case audit.ActorUser:
		v.Actor = cmp.Or(r.ActorEmail, l.T("audit.actor.deleted"))
	case audit.ActorToken:
		v.Actor = l.T("audit.actor.token", "Name", cmp.Or(r.ActorToken, "?"))
	default:
		v.Actor = l.T("audit.actor.system")
	}
	switch r.EntityType {
	case "workflow_execution":
		v.EntityURL = lk.url("execution", r.EntityID)
	case "workflow":
		v.EntityURL = lk.url("workflow", r.EntityID)
	case "dead_letter_queue":
		v.EntityURL = lk.url("dlq.item", r.EntityID)
	case "api_token":
		v.EntityURL = lk.url("tokens")
	case "workflow_execution_error":
		if ex := details.str("executionId"); ex != "" {
			v.EntityURL = lk.url("execution", ex)
		}
	case "compensation_action": // the execution it undoes a step of, at its rollback
		if ex := details.str("executionId"); ex != "" {
			v.EntityURL = lk.url("execution", ex) + "#rollback"
		}
	case "circuit_breaker_state":
		if u := lk.url("breakers"); u != "" {
			v.EntityURL = u + "#breaker-" + r.EntityID // the row's id on the breakers page
		}
	case "db_connection":
		v.EntityURL = lk.url("connections")
	case "credential":
		v.EntityURL = lk.url("credentials")
	case "dlq_bulk_job":
		v.EntityURL = lk.url("dlq.bulk", r.EntityID)
	case "notification_delivery":
		v.EntityURL = lk.url("notifications.deliveries")
	case "notification_settings":
		v.EntityURL = lk.url("notifications.settings")
	case "organization":
		v.EntityURL = lk.url("profile")
	}
	return v
}

// withParam returns the query with key set to value ("" removes it).
func withParam(q url.Values, key, value string) string {
	out := url.Values{}
	for k, v := range q {
		out[k] = v
	}
	if value == "" {
		out.Del(key)
	} else {
		out.Set(key, value)
	}
	return out.Encode()
}

// auditNote says in a line what an entry's details add to its label: how a dead letter
// was retried (and from which step), that its replay succeeded, and the notes someone
// wrote. "" when there is nothing to add.
func auditNote(l *i18n.Localizer, m auditDetails) string {
	var parts []string
	str := m.str
	if mode := str("mode"); mode != "" {
		parts = append(parts, l.TOr("audit.note.mode."+mode, mode, "Step", str("stepId")))
	}
	if _, ok := m["inputAfter"]; ok {
		parts = append(parts, l.T("audit.note.inputedited"))
	}
	if str("resolution") == "replay_succeeded" {
		parts = append(parts, l.T("audit.note.replaysucceeded"))
	}
	if again, _ := m["replayFailed"].(bool); again {
		parts = append(parts, l.T("audit.note.failedagain"))
	}
	if msg := str("message"); msg != "" { // an error's reason (already masked)
		parts = append(parts, l.Text(msg))
	}
	if n := str("notes"); n != "" {
		parts = append(parts, l.T("audit.note.quoted", "Text", n))
	}
	return strings.Join(parts, " · ")
}

// auditDetails are an audit entry's details, decoded (nil when they are not an object).
type auditDetails map[string]any

func detailsOf(details models.JSON) auditDetails {
	var m auditDetails
	_ = json.Unmarshal(details, &m)
	return m
}

// str is a string field of the details, or "".
func (m auditDetails) str(key string) string {
	s, _ := m[key].(string)
	return s
}

// detailString is a string field of an audit entry's details, or "".
func detailString(details models.JSON, key string) string {
	return detailsOf(details).str(key)
}
