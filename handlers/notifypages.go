package handlers

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/audit"
	"lifeline/services/notify"
	"lifeline/services/workflows"
	"lifeline/views/i18n"
	"lifeline/views/layouts"
	"lifeline/views/pages"
)

// notifyPagesService is what the notification pages need besides the API's methods.
type notifyPagesService interface {
	notificationService
	DeliveryLog(ctx context.Context, orgID string, f notify.DeliveryFilter) (notify.DeliveryPage, error)
	Covered(ctx context.Context, orgID, deliveryID string) ([]notify.Covered, error)
	EffectiveSettings(ctx context.Context, orgID string, raw json.RawMessage) (notify.Settings, error)
}

// workflowEditor reads a workflow and saves a new version of it (workflows.Service).
type workflowEditor interface {
	Get(ctx context.Context, orgID, id string) (*models.Workflow, error)
	Update(ctx context.Context, orgID, id string, actor audit.Actor, raw []byte) (*models.Workflow, error)
}

var (
	_ notifyPagesService = (*notify.Service)(nil)
	_ workflowEditor     = (*workflows.Service)(nil)
)

// NotifyPagesHandler serves the notification pages: the organization's settings with test
// messages (/settings/notifications, admins), the delivery log with resend
// (/notifications/deliveries, admins), the user's in-app notifications (/notifications)
// with the top bar's bell, and the workflow page's card of effective settings. Another
// organization's ids are 404.
type NotifyPagesHandler struct {
	*chrome
	ns  notifyPagesService
	wfs workflowEditor
	// Now is the clock of relative times ("3 minutes ago").
	Now func() time.Time
}

// newNotifyPagesHandler returns the handler.
func newNotifyPagesHandler(ch *chrome, ns notifyPagesService, wfs workflowEditor) *NotifyPagesHandler {
	return &NotifyPagesHandler{chrome: ch, ns: ns, wfs: wfs, Now: time.Now}
}

// eventKeys are the settings' event switches, in the form's order.
var eventKeys = []string{"notifyOnFirstFailure", "notifyOnRetryExhausted", "notifyOnDLQ", "notifyOnBreakerOpen"}

// channelLabel names a channel in the user's language.
func channelLabel(l *i18n.Localizer, ch string) string {
	return l.TOr("notifications.channel."+ch, ch)
}

// Settings renders the settings page; ?done=saved confirms a save.
func (h *NotifyPagesHandler) Settings(c echo.Context) error {
	st, err := h.ns.OrgSettings(c.Request().Context(), principal(c).OrganizationID)
	if err != nil {
		return err
	}
	f := h.formOf(localizer(c), st.Masked())
	return h.renderSettings(c, http.StatusOK, f, c.QueryParam("done") == "saved", nil)
}

// formOf fills the form with settings (webhook URLs already masked).
func (h *NotifyPagesHandler) formOf(l *i18n.Localizer, st notify.Settings) pages.NotifySettingsForm {
	f := pages.NotifySettingsForm{Enabled: st.Enabled, Recipients: strings.Join(st.Recipients, "\n"), SlackWebhookURL: st.SlackWebhookURL,
		TeamsWebhookURL: st.TeamsWebhookURL, DigestThreshold: strconv.Itoa(st.DigestThreshold)}
	on := map[string]bool{"notifyOnFirstFailure": st.NotifyOnFirstFailure, "notifyOnRetryExhausted": st.NotifyOnRetryExhausted,
		"notifyOnDLQ": st.NotifyOnDLQ, "notifyOnBreakerOpen": st.NotifyOnBreakerOpen}
	for _, ch := range notify.Channels {
		f.Channels = append(f.Channels, pages.Check{Name: "channels", Value: string(ch), Label: channelLabel(l, string(ch)), Checked: slices.Contains(st.Channels, ch)})
	}
	for _, k := range eventKeys {
		f.Events = append(f.Events, pages.Check{Name: k, Value: "true", Label: l.T("notifications.field." + k), Hint: l.TOr("notifications.field."+k+".hint", ""), Checked: on[k]})
	}
	for _, per := range []string{notify.PerGroup, notify.PerFailure} {
		f.NotifyPer = append(f.NotifyPer, pages.Check{Name: "notifyPer", Value: per, Label: l.T("notifications.field.notifyPer." + per),
			Hint: l.T("notifications.field.notifyPer." + per + ".hint"), Checked: cmp.Or(st.NotifyPer, notify.PerGroup) == per})
	}
	return f
}

func (h *NotifyPagesHandler) renderSettings(c echo.Context, status int, f pages.NotifySettingsForm, done bool, tested *pages.NotifyTest) error {
	l := localizer(c)
	f.Action = h.url("notifications.settings.save")
	vm := pages.NotifySettingsVM{Form: f, Done: done, DeliveriesURL: h.url("notifications.deliveries"), InboxURL: h.url("notifications")}
	for _, ch := range notify.Channels {
		t := pages.NotifyTest{Channel: string(ch), Label: channelLabel(l, string(ch)), URL: h.url("notifications.test")}
		if tested != nil && tested.Channel == t.Channel {
			t = *tested
		}
		vm.Tests = append(vm.Tests, t)
	}
	return render(c, status, pages.NotifySettings(h.page(c, "notifications.settings.title", "notifications"), vm))
}

// settingsJSON turns the settings form into the API's document: checkboxes are false when
// not sent, recipients one per line (or comma-separated), the threshold a number when it
// reads as one (otherwise as sent, for the service to refuse).
func settingsJSON(c echo.Context) (json.RawMessage, []string, error) {
	form, err := c.FormParams()
	if err != nil {
		return nil, nil, err
	}
	doc := map[string]any{"enabled": form.Get("enabled") == "true"}
	channels := []string{}
	for _, ch := range form["channels"] {
		if ch = strings.TrimSpace(ch); ch != "" {
			channels = append(channels, ch)
		}
	}
	doc["channels"] = channels
	recipients := []string{}
	for _, r := range strings.FieldsFunc(form.Get("recipients"), func(r rune) bool { return r == '\n' || r == '\r' || r == ',' || r == ';' }) {
		if r = strings.TrimSpace(r); r != "" {
			recipients = append(recipients, r)
		}
	}
	doc["recipients"] = recipients
	doc["slackWebhookUrl"] = strings.TrimSpace(form.Get("slackWebhookUrl"))
	doc["teamsWebhookUrl"] = strings.TrimSpace(form.Get("teamsWebhookUrl"))
	for _, k := range eventKeys {
		doc[k] = form.Get(k) == "true"
	}
	doc["notifyPer"] = cmp.Or(strings.TrimSpace(form.Get("notifyPer")), notify.PerGroup)
	d := strings.TrimSpace(form.Get("digestThresholdPerMinute"))
	if n, err := strconv.Atoi(d); err == nil {
		doc["digestThresholdPerMinute"] = n
	} else {
		doc["digestThresholdPerMinute"] = d
	}
	raw, err := json.Marshal(doc)
	return raw, recipients, err
}

// SaveSettings saves the settings form: 422 with a message next to each field (nothing is
// saved), or back to the page with a confirmation.
func (h *NotifyPagesHandler) SaveSettings(c echo.Context) error {
	raw, recipients, err := settingsJSON(c)
	if err != nil {
		return err
	}
	p, l := principal(c), localizer(c)
	_, err = h.ns.SaveOrgSettings(c.Request().Context(), p.OrganizationID, actorOf(p), raw)
	if me := invalid(err); me != nil {
		var st notify.Settings
		_ = json.Unmarshal(raw, &st)
		f := h.formOf(l, st)
		f.Recipients = c.FormValue("recipients")
		f.DigestThreshold = c.FormValue("digestThresholdPerMinute")
		f.Errors = settingsErrors(l, me.Fields, recipients)
		f.FormError = l.T("notifications.settings.invalid")
		return h.renderSettings(c, http.StatusUnprocessableEntity, f, false, nil)
	}
	if err != nil {
		return err
	}
	return redirect(c, h.url("notifications.settings")+"?done=saved")
}

// settingsErrors are the service's field messages by form field, in the user's language:
// every refused recipient under "recipients".
func settingsErrors(l *i18n.Localizer, fields map[string]string, recipients []string) map[string]string {
	out := map[string]string{}
	var bad []string
	for k, msg := range fields {
		if rest, ok := strings.CutPrefix(k, "recipients["); ok {
			i, _ := strconv.Atoi(strings.TrimSuffix(rest, "]"))
			r := ""
			if i >= 0 && i < len(recipients) {
				r = recipients[i]
			}
			id := "notifications.err.recipient"
			if strings.HasPrefix(msg, "unknown role") {
				id = "notifications.err.role"
			}
			bad = append(bad, l.T(id, "Value", r))
			continue
		}
		out[k] = fieldMessage(l, msg)
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		out["recipients"] = strings.Join(bad, " ")
	}
	return out
}

// fieldMessages are the service's English field messages and their message ids.
var fieldMessages = map[string]string{
	"must be an https URL":                                "notifications.err.https",
	"must not contain credentials":                        "notifications.err.credentials",
	"is too long (at most 2000 characters)":               "notifications.err.long",
	"must be a Slack webhook (https://hooks.slack.com/…)": "notifications.err.slackhost",
	"must be a Teams Workflows webhook (https://….logic.azure.com/… or ….api.powerplatform.com/…)": "notifications.err.teamshost",
	"is required for the slack channel":          "notifications.err.slackrequired",
	"is required for the teams channel":          "notifications.err.teamsrequired",
	"must be a whole number from 1 to 10000":     "notifications.err.digest",
	"must be a list of email, app, slack, teams": "notifications.err.channels",
	"save a webhook URL first":                   "notifications.err.savefirst",
}

func fieldMessage(l *i18n.Localizer, msg string) string {
	if id, ok := fieldMessages[msg]; ok {
		return l.T(id)
	}
	switch {
	case strings.HasPrefix(msg, "points at an address that is not allowed"):
		return l.T("notifications.err.address", "Address", strings.TrimSuffix(strings.TrimPrefix(msg, "points at an address that is not allowed ("), ")"))
	case strings.HasPrefix(msg, "unknown channel"):
		return l.T("notifications.err.channels")
	case strings.HasPrefix(msg, "at most"):
		return l.T("notifications.err.toomany", "Max", notify.MaxRecipients)
	}
	return l.Text(msg)
}

// Test sends a test message on the form's channel: for htmx the result's fragment (sent, or
// the exact error), otherwise the page with it.
func (h *NotifyPagesHandler) Test(c echo.Context) error {
	p, l := principal(c), localizer(c)
	ch := c.FormValue("channel")
	if !slices.Contains(notify.Channels, notify.Channel(ch)) {
		return apperr.Invalid(l.T("notifications.err.channels"), map[string]string{"channel": l.T("notifications.err.channels")})
	}
	t := pages.NotifyTest{Channel: ch, Label: channelLabel(l, ch), URL: h.url("notifications.test"), Live: true, Status: "ok"}
	err := h.ns.Test(c.Request().Context(), p.OrganizationID, p.UserID, notify.Channel(ch))
	me := invalid(err)
	switch {
	case err == nil:
		t.Message = l.T("notifications.test.sent." + ch)
	case errors.Is(err, notify.ErrTestFailed):
		t.Status, t.Message = "failed", l.Text(strings.TrimPrefix(err.Error(), notify.ErrTestFailed.Error()+": "))
	case me != nil:
		t.Status = "failed"
		t.Message = l.Text(me.Message)
		for _, m := range me.Fields {
			t.Message = fieldMessage(l, m)
		}
		if ch == string(notify.Slack) || ch == string(notify.Teams) {
			t.Message = l.T("notifications.err.nowebhook")
		}
	default:
		return err
	}
	if isHTMX(c) {
		return render(c, http.StatusOK, pages.NotifyTestResult(t))
	}
	st, err := h.ns.OrgSettings(c.Request().Context(), p.OrganizationID)
	if err != nil {
		return err
	}
	return h.renderSettings(c, http.StatusOK, h.formOf(l, st.Masked()), false, &t)
}

// deliveryStatuses are the statuses the log filters by.
var deliveryStatuses = []string{models.DeliveryPending, models.DeliverySending, models.DeliverySent, models.DeliveryFailed, models.DeliveryDigested}

// deliveryFilterOf reads the log's filter from query keys (executionId, channel, status,
// after); an EINVALID error names every key that is not valid.
func deliveryFilterOf(l *i18n.Localizer, v url.Values) (notify.DeliveryFilter, error) {
	q := queryOf(l, v)
	chans := make([]string, 0, len(notify.Channels))
	for _, ch := range notify.Channels {
		chans = append(chans, string(ch))
	}
	f := notify.DeliveryFilter{ExecutionID: q.id("executionId", "notifications.err.executionid"), Channel: q.oneOf("channel", chans),
		Status: q.oneOf("status", deliveryStatuses), After: q.get("after"), Limit: 50}
	return f, q.err()
}

// Deliveries renders the delivery log, or for htmx the same page (the form selects its
// table); ?done=resent confirms a resend.
func (h *NotifyPagesHandler) Deliveries(c echo.Context) error {
	p, l, ctx := principal(c), localizer(c), c.Request().Context()
	v := c.QueryParams()
	f, ferr := deliveryFilterOf(l, v)
	chans := make([]string, 0, len(notify.Channels))
	for _, ch := range notify.Channels {
		chans = append(chans, string(ch))
	}
	vm := pages.NotifyDeliveriesVM{CSRF: csrfToken(c), SettingsURL: h.url("notifications.settings"),
		Filter: pages.NotifyDeliveriesFilter{Action: h.url("notifications.deliveries"), ExecutionID: f.ExecutionID,
			Channels: options(chans, f.Channel, func(s string) string { return channelLabel(l, s) }),
			Statuses: options(deliveryStatuses, f.Status, func(s string) string { return l.TOr("notifications.status."+s, s) })},
		Filtered: f.ExecutionID != "" || f.Channel != "" || f.Status != ""}
	if c.QueryParam("done") == "resent" {
		vm.Done = "resent"
	}
	status := http.StatusOK
	var page notify.DeliveryPage
	err := ferr
	if err == nil {
		page, err = h.ns.DeliveryLog(ctx, p.OrganizationID, f)
	}
	if me := invalid(err); me != nil {
		status = http.StatusUnprocessableEntity
		vm.Error, vm.FieldErrors = translated(l, me.Message, me.Fields)
		vm.Filter.Errors = vm.FieldErrors
		vm.Filter.ExecutionID = queryOf(l, v).shown("executionId")
	} else if err != nil {
		return err
	}
	back := url.Values{}
	set(back, "executionId", f.ExecutionID)
	set(back, "channel", f.Channel)
	set(back, "status", f.Status)
	for k, vals := range back {
		vm.Back = append(vm.Back, pages.HiddenField{Name: k, Value: vals[0]})
	}
	if f.ExecutionID != "" && vm.Error == "" {
		vm.ExecutionURL = h.url("execution", f.ExecutionID)
	}
	if page.Next != "" {
		next := url.Values{}
		for k, vals := range back {
			next[k] = vals
		}
		next.Set("after", page.Next)
		vm.NextURL = h.url("notifications.deliveries") + "?" + next.Encode()
	}
	for _, d := range page.Items {
		r := h.deliveryRow(l, d, page.Users)
		r.Subject = page.Subjects[d.ExecutionID]
		vm.Rows = append(vm.Rows, r)
	}
	return render(c, status, pages.NotifyDeliveries(h.page(c, "notifications.log.title", "deliveries"), vm))
}

// deliveryRow is one delivery for the log.
func (h *NotifyPagesHandler) deliveryRow(l *i18n.Localizer, d notify.Delivery, users map[string]string) pages.NotifyDeliveryRow {
	r := pages.NotifyDeliveryRow{ID: d.ID, Channel: d.Channel, ChannelLabel: channelLabel(l, d.Channel), Recipient: d.Recipient,
		Event: d.Event, EventLabel: l.TOr("notifications.event."+d.Event, d.Event), Status: d.Status,
		StatusLabel: l.TOr("notifications.status."+d.Status, d.Status), Attempts: d.Attempts, LastError: l.Text(deref(d.LastError)), ExecutionID: d.ExecutionID}
	if email, ok := users[d.Recipient]; ok && d.Channel == string(notify.App) {
		r.Recipient = email
	}
	at := func(s *string) (string, string) {
		if s == nil {
			return "", ""
		}
		t, err := time.Parse(time.RFC3339, *s)
		if err != nil {
			return "", ""
		}
		return rfc(t), displayTime(l, t)
	}
	r.CreatedAt, r.CreatedAtText = at(&d.CreatedAt)
	r.SentAt, r.SentAtText = at(d.SentAt)
	r.NextAt, r.NextAtText = at(d.NextAttempt)
	if d.ExecutionID != "" {
		r.ExecutionURL = h.url("execution", d.ExecutionID)
	}
	if d.Status == models.DeliverySent || d.Status == models.DeliveryFailed {
		r.ResendURL = h.url("notifications.resend", d.ID)
	}
	return r
}

// Resend queues a delivery again and goes back to the log with its filter.
func (h *NotifyPagesHandler) Resend(c echo.Context) error {
	id := c.Param("id")
	if err := checkID(id, "delivery"); err != nil {
		return err
	}
	p := principal(c)
	if err := h.ns.Resend(c.Request().Context(), p.OrganizationID, id, actorOf(p)); err != nil {
		return err
	}
	back := url.Values{}
	if f, err := deliveryFilterOf(localizer(c), url.Values{"executionId": {c.FormValue("executionId")}, "channel": {c.FormValue("channel")},
		"status": {c.FormValue("status")}}); err == nil {
		set(back, "executionId", f.ExecutionID)
		set(back, "channel", f.Channel)
		set(back, "status", f.Status)
	}
	back.Set("done", "resent")
	return redirect(c, h.url("notifications.deliveries")+"?"+back.Encode())
}

// inboxSize is how many notifications the list shows.
const inboxSize = 50

// Inbox renders the user's notifications, or for htmx the list alone.
func (h *NotifyPagesHandler) Inbox(c echo.Context) error {
	vm, err := h.inboxVM(c)
	if err != nil {
		return err
	}
	if isHTMX(c) {
		return render(c, http.StatusOK, pages.NotifyInboxList(vm))
	}
	return render(c, http.StatusOK, pages.NotifyInbox(h.page(c, "notifications.inbox.title", ""), vm))
}

// inboxItem is a notification as the inbox shows it. One about a failure is written from
// its event in the reader's language: who it is for (the subject), what happened, and the
// workflow, step, error type and reason. Others (a digest, a test) keep the text they were
// sent with.
func inboxItem(l *i18n.Localizer, n notify.InApp) pages.NotifyItem {
	it := pages.NotifyItem{ID: n.ID, Title: n.Title, Body: n.Body, Unread: n.ReadAt == nil}
	e := n.Event
	if e == nil {
		if n.Kind == "admin_request" || n.Kind == "input_change" { // an accountant's request about an item
			it.Kind, it.KindTone, it.Link = l.T("notifications.event."+n.Kind), "warn", n.Link
		}
		return it
	}
	switch e.Kind {
	case notify.FirstFailure, notify.RetryExhausted, notify.DLQ, notify.BreakerOpened:
	case notify.ChangeApproved, notify.ChangeRejected:
		// An admin's decision on the reader's input change: what, who decided, the note.
		it.Kind, it.KindTone = l.T("notifications.event."+string(e.Kind)), "ok"
		if e.Kind == notify.ChangeRejected {
			it.KindTone = "warn"
		}
		it.Title = l.T("notifications.inbox."+string(e.Kind), "Subject", cmp.Or(e.Subject, e.WorkflowName, e.WorkflowID))
		it.Facts = append(it.Facts, cmp.Or(e.WorkflowName, e.WorkflowID))
		if e.DecidedBy != "" {
			it.Facts = append(it.Facts, l.T("notifications.inbox.change.by", "Admin", e.DecidedBy))
		}
		it.Body = ""
		if e.Notes != "" {
			it.Body = l.T("notifications.inbox.change.note", "Notes", e.Notes)
		}
		return it
	case notify.GroupOpened, notify.GroupFollowUp:
		// A failure group's one entry: its title, where it fails, and how many executions
		// it has now (counted in place as they come).
		it.Kind, it.KindTone = l.T("notifications.event."+string(e.Kind)), "danger"
		if e.Group != nil {
			it.Title = l.Text(e.Group.Title)
		}
		it.Title = cmp.Or(it.Title, l.Text(e.Reason))
		it.Facts = append(it.Facts, cmp.Or(e.WorkflowName, e.WorkflowID))
		if step := cmp.Or(e.StepName, e.StepID); step != "" {
			it.Facts = append(it.Facts, step)
		}
		it.ErrorType = e.ErrorType
		it.Body = l.N("notifications.inbox.group.count", max(n.Occurrences, 1))
		return it
	default:
		return it
	}
	it.Kind, it.KindTone = l.TOr("notifications.event."+string(e.Kind), string(e.Kind)), "danger"
	if e.Kind == notify.FirstFailure || e.Kind == notify.BreakerOpened { // retries or trials still to come
		it.KindTone = "warn"
	}
	workflow := cmp.Or(e.WorkflowName, e.WorkflowID)
	step := cmp.Or(e.StepName, e.StepID)
	if e.Kind == notify.BreakerOpened {
		switch {
		case e.StepID == "" && e.StepName != "": // a breaker per host: StepName is the host
			it.Title = l.T("notifications.inbox.breaker.host", "Host", e.StepName)
		default:
			it.Title = l.T("notifications.inbox.breaker", "Step", cmp.Or(step, shortID(e.BreakerID)))
		}
		it.Facts = []string{workflow}
	} else {
		it.Title = cmp.Or(e.Subject, workflow)
		if e.Subject != "" {
			it.Facts = append(it.Facts, workflow)
		}
		if step != "" {
			it.Facts = append(it.Facts, step)
		}
		it.ErrorType = e.ErrorType
	}
	it.Body = l.Text(e.Reason)
	return it
}

func (h *NotifyPagesHandler) inboxVM(c echo.Context) (pages.NotifyInboxVM, error) {
	p, l := principal(c), localizer(c)
	vm := pages.NotifyInboxVM{ReadAllURL: h.url("notifications.read_all"), CSRF: csrfToken(c), RefreshURL: h.url("notifications")}
	if p.Can(models.RoleAdmin) {
		vm.SettingsURL, vm.LogURL = h.url("notifications.settings"), h.url("notifications.deliveries")
	}
	items, unread, err := h.ns.Inbox(c.Request().Context(), p.OrganizationID, p.UserID, inboxSize)
	if err != nil {
		return vm, err
	}
	vm.Unread = int(unread)
	vm.UnreadText = l.N("notifications.inbox.unreadcount", vm.Unread)
	now := h.Now()
	for _, n := range items {
		it := inboxItem(l, n)
		switch {
		case n.Event != nil && n.Event.DeadLetterID != "": // about an item: its page
			it.Link = h.url("dlq.item", n.Event.DeadLetterID)
		case n.GroupID != "":
			it.Link = cmp.Or(h.url("dlq.group", n.GroupID), h.url("dlq.problems")) // the group's page, once it exists
		case n.ExecutionID != "":
			it.Link = h.url("execution", n.ExecutionID)
		}
		if t, err := time.Parse(time.RFC3339, n.CreatedAt); err == nil {
			it.At, it.AtText, it.AtRelative = rfc(t), displayTime(l, t), l.Relative(t, now)
		}
		if it.Unread {
			it.ReadURL = h.url("notifications.read", n.ID)
			if it.Link != "" { // opening it reads it
				it.Link = h.url("notifications.open", n.ID) + "?" + url.Values{"to": {it.Link}}.Encode()
			}
		}
		vm.Items = append(vm.Items, it)
	}
	return vm, nil
}

// Bell answers the bell alone (polled by the top bar).
func (h *NotifyPagesHandler) Bell(c echo.Context) error {
	b := h.bell(c)
	if b == nil {
		return c.NoContent(http.StatusNoContent)
	}
	return render(c, http.StatusOK, layouts.BellLink(*b))
}

// MarkRead marks one of the user's notifications read: for htmx the list (and the bell is
// told to refresh), otherwise back to the list.
func (h *NotifyPagesHandler) MarkRead(c echo.Context) error {
	id := c.Param("id")
	if err := checkID(id, "notification"); err != nil {
		return err
	}
	p := principal(c)
	if err := h.ns.MarkRead(c.Request().Context(), p.OrganizationID, p.UserID, id); err != nil {
		return err
	}
	return h.afterMark(c)
}

// Open: GET /notifications/{id}/open?to=/executions/{id}, the link of an unread
// notification: it is marked read and the user goes on to its execution. Only an
// execution's page of this server is a destination.
func (h *NotifyPagesHandler) Open(c echo.Context) error {
	id := c.Param("id")
	if err := checkID(id, "notification"); err != nil {
		return err
	}
	to := c.QueryParam("to")
	exID, ok := strings.CutPrefix(to, strings.TrimSuffix(h.url("execution", "x"), "x"))
	if !ok {
		exID, ok = strings.CutPrefix(to, strings.TrimSuffix(h.url("dlq.item", "x"), "x")) // an accountant's request
	}
	if !ok || checkID(exID, "execution") != nil {
		to = h.url("notifications")
	}
	p := principal(c)
	if err := h.ns.MarkRead(c.Request().Context(), p.OrganizationID, p.UserID, id); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, to)
}

// MarkAllRead marks all the user's notifications read.
func (h *NotifyPagesHandler) MarkAllRead(c echo.Context) error {
	p := principal(c)
	if _, err := h.ns.MarkAllRead(c.Request().Context(), p.OrganizationID, p.UserID); err != nil {
		return err
	}
	return h.afterMark(c)
}

func (h *NotifyPagesHandler) afterMark(c echo.Context) error {
	if !isHTMX(c) {
		return redirect(c, h.url("notifications"))
	}
	vm, err := h.inboxVM(c)
	if err != nil {
		return err
	}
	c.Response().Header().Set("HX-Trigger", "notifications-changed")
	return render(c, http.StatusOK, pages.NotifyInboxList(vm))
}

// WorkflowCard answers the workflow page's card: the notification settings in effect for
// the workflow (its settings.errorNotifications over the organization's defaults).
func (h *NotifyPagesHandler) WorkflowCard(c echo.Context) error {
	id := c.Param("id")
	if err := checkID(id, "workflow"); err != nil {
		return err
	}
	p, l, ctx := principal(c), localizer(c), c.Request().Context()
	wf, err := h.wfs.Get(ctx, p.OrganizationID, id)
	if err != nil {
		return err
	}
	var def struct {
		Settings struct {
			ErrorNotifications json.RawMessage `json:"errorNotifications"`
		} `json:"settings"`
	}
	_ = json.Unmarshal(wf.Definition, &def)
	raw := def.Settings.ErrorNotifications
	st, err := h.ns.EffectiveSettings(ctx, p.OrganizationID, raw)
	if err != nil {
		return err
	}
	vm := pages.NotifyCardVM{Enabled: st.Enabled}
	var own map[string]json.RawMessage
	if json.Unmarshal(raw, &own) == nil {
		for k := range own {
			vm.Overridden = append(vm.Overridden, k)
		}
		slices.Sort(vm.Overridden)
	}
	var chans, events []string
	for _, ch := range st.Channels {
		chans = append(chans, channelLabel(l, string(ch)))
	}
	on := map[string]bool{"notifyOnFirstFailure": st.NotifyOnFirstFailure, "notifyOnRetryExhausted": st.NotifyOnRetryExhausted,
		"notifyOnDLQ": st.NotifyOnDLQ, "notifyOnBreakerOpen": st.NotifyOnBreakerOpen}
	for _, k := range eventKeys {
		if on[k] {
			events = append(events, l.T("notifications.card."+k))
		}
	}
	recipients := st.Recipients
	if len(recipients) == 0 {
		recipients = notify.DefaultRecipients
	}
	vm.Channels = joinOrDash(chans)
	vm.Recipients = joinOrDash(recipientWords(l, recipients))
	vm.Events = joinOrDash(events)
	vm.NotifyPerValue = cmp.Or(st.NotifyPer, notify.PerGroup)
	vm.NotifyPer = l.T("notifications.card.notifyPer." + vm.NotifyPerValue)
	if p.Can(models.RoleAdmin) {
		vm.SettingsURL = h.url("notifications.settings")
		vm.EditURL = h.url("workflow.notifications.edit", wf.ID) // "" without the workflows service
	}
	return render(c, http.StatusOK, pages.NotifyCard(vm))
}

// recipientWords are recipients as the card's reader says them: a role ("role:admin") in
// words ("administratorzy"); an address as it is. The settings form keeps the syntax.
func recipientWords(l *i18n.Localizer, rs []string) []string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		if role, ok := strings.CutPrefix(r, "role:"); ok {
			r = l.TOr("escalation.role."+role, r)
		}
		out = append(out, r)
	}
	return out
}

func joinOrDash(s []string) string {
	if len(s) == 0 {
		return "—"
	}
	return strings.Join(s, ", ")
}

// workflowSettings reads a workflow's definition (as a document, to write it back) and its
// own settings.errorNotifications (nil when it sets none).
func workflowSettings(wf *models.Workflow) (map[string]any, map[string]any, error) {
	var def map[string]any
	if err := json.Unmarshal(wf.Definition, &def); err != nil {
		return nil, nil, err
	}
	settings, _ := def["settings"].(map[string]any)
	own, _ := settings["errorNotifications"].(map[string]any)
	return def, own, nil
}

// WorkflowEdit renders one workflow's notification settings (admins): the settings in
// effect, and whether the workflow uses the organization's defaults.
func (h *NotifyPagesHandler) WorkflowEdit(c echo.Context) error {
	wf, err := h.workflow(c)
	if err != nil {
		return err
	}
	_, own, err := workflowSettings(wf)
	if err != nil {
		return err
	}
	raw, _ := json.Marshal(own)
	if own == nil {
		raw = nil
	}
	st, err := h.ns.EffectiveSettings(c.Request().Context(), wf.OrganizationID, raw)
	if err != nil {
		return err
	}
	f := h.formOf(localizer(c), st.Masked())
	f.UseDefaults = own == nil
	return h.renderWorkflow(c, http.StatusOK, wf, f)
}

// WorkflowSave saves one workflow's notification settings into its definition (a new
// version): with "useDefaults" it sets none of its own; otherwise every field of the form. A
// webhook URL sent back masked keeps the stored one (the workflow's own; the organization's
// is not copied). 422 with a message next to each field, nothing saved.
func (h *NotifyPagesHandler) WorkflowSave(c echo.Context) error {
	wf, err := h.workflow(c)
	if err != nil {
		return err
	}
	def, own, err := workflowSettings(wf)
	if err != nil {
		return err
	}
	raw, recipients, err := settingsJSON(c)
	if err != nil {
		return err
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return err
	}
	delete(doc, "digestThresholdPerMinute") // the organization's
	p, l, ctx := principal(c), localizer(c), c.Request().Context()
	org, err := h.ns.EffectiveSettings(ctx, wf.OrganizationID, nil)
	if err != nil {
		return err
	}
	for k, inherited := range map[string]string{"slackWebhookUrl": org.SlackWebhookURL, "teamsWebhookUrl": org.TeamsWebhookURL} {
		sent, _ := doc[k].(string)
		stored, _ := own[k].(string)
		switch {
		case stored != "" && sent == models.MaskWebhookURL(stored):
			// the workflow's own, sent back masked: Workflows.Update restores it
		case sent == "" || (inherited != "" && sent == models.MaskWebhookURL(inherited)):
			delete(doc, k) // the organization's
		}
	}
	settings, _ := def["settings"].(map[string]any)
	if settings == nil {
		settings = map[string]any{}
	}
	useDefaults := c.FormValue("useDefaults") == "true"
	if useDefaults {
		delete(settings, "errorNotifications")
	} else {
		settings["errorNotifications"] = doc
	}
	def["settings"] = settings
	body, err := json.Marshal(def)
	if err != nil {
		return err
	}
	_, err = h.wfs.Update(ctx, p.OrganizationID, wf.ID, actorOf(p), body)
	if me := invalid(err); me != nil {
		var st notify.Settings
		_ = json.Unmarshal(raw, &st)
		f := h.formOf(l, st)
		f.SlackWebhookURL, f.TeamsWebhookURL = c.FormValue("slackWebhookUrl"), c.FormValue("teamsWebhookUrl")
		f.Recipients, f.UseDefaults = c.FormValue("recipients"), useDefaults
		fields := map[string]string{}
		for k, v := range me.Fields {
			if name, ok := strings.CutPrefix(k, notify.FieldPrefix+"."); ok {
				fields[name] = v
			} else {
				fields[k] = v // not the form's: shown with the form's message
				f.FormError = me.Message
			}
		}
		f.Errors = settingsErrors(l, fields, recipients)
		if f.FormError == "" {
			f.FormError = l.T("notifications.settings.invalid")
		}
		return h.renderWorkflow(c, http.StatusUnprocessableEntity, wf, f)
	}
	if err != nil {
		return err
	}
	return redirect(c, h.url("workflow", wf.ID)+"#notify-card")
}

// workflow is the organization's workflow the URL names.
func (h *NotifyPagesHandler) workflow(c echo.Context) (*models.Workflow, error) {
	id := c.Param("id")
	if err := checkID(id, "workflow"); err != nil {
		return nil, err
	}
	return h.wfs.Get(c.Request().Context(), principal(c).OrganizationID, id)
}

func (h *NotifyPagesHandler) renderWorkflow(c echo.Context, status int, wf *models.Workflow, f pages.NotifySettingsForm) error {
	f.ForWorkflow, f.Action = true, h.url("workflow.notifications.save", wf.ID)
	vm := pages.NotifyWorkflowVM{WorkflowName: wf.Name, WorkflowURL: h.url("workflow", wf.ID), OrgSettingsURL: h.url("notifications.settings"),
		Version: wf.Version, Form: f, CSRF: csrfToken(c)}
	return render(c, status, pages.NotifyWorkflowSettings(h.page(c, localizer(c).T("notifications.workflow.title", "Name", wf.Name), "workflows"), vm))
}

// Failures lists exactly the failures a digest or a failure group's follow-up (delivery id)
// stands for, with their count: the page its message links to. Every member of the
// organization may read it (the message went to a channel, not to a person); another
// organization's delivery is 404.
func (h *NotifyPagesHandler) Failures(c echo.Context) error {
	id := c.Param("id")
	if err := checkID(id, "notification"); err != nil {
		return err
	}
	p, l := principal(c), localizer(c)
	cov, err := h.ns.Covered(c.Request().Context(), p.OrganizationID, id)
	if models.IsNotFound(err) {
		return apperr.NotFound("notification")
	}
	if err != nil {
		return err
	}
	vm := pages.NotifyFailuresVM{CountText: l.N("notifications.failures.count", len(cov))}
	for _, f := range cov {
		row := pages.NotifyFailure{Execution: shortID(f.ExecutionID), ExecutionURL: h.url("execution", f.ExecutionID), Subject: f.Subject,
			Reason: l.Text(f.Reason), At: rfc(f.At), AtText: displayTime(l, f.At)}
		if f.DeadLetterID != "" {
			row.ItemURL = h.url("dlq.item", f.DeadLetterID)
		}
		vm.Rows = append(vm.Rows, row)
	}
	return render(c, http.StatusOK, pages.NotifyFailures(h.page(c, "notifications.failures.title", "notifications"), vm))
}
