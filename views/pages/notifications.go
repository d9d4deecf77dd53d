package pages

import "net/url"

// NotifySettingsVM feeds NotifySettings (the organization's notification defaults, admins).
type NotifySettingsVM struct {
	Form  NotifySettingsForm
	Tests []NotifyTest // one "send a test" button per channel
	// Done confirms that the settings were saved.
	Done          bool
	DeliveriesURL string
	InboxURL      string
}

// NotifySettingsForm is the settings form. Its field names are the settings' keys (enabled,
// channels, recipients, slackWebhookUrl, teamsWebhookUrl, notifyOnFirstFailure,
// notifyOnRetryExhausted, notifyOnDLQ, notifyOnBreakerOpen, digestThresholdPerMinute).
type NotifySettingsForm struct {
	Action   string
	Enabled  bool
	Channels []Check
	// Recipients are one per line (addresses and roles such as role:admin).
	Recipients string
	// The webhook URLs as the form shows them: masked when stored (sent back masked, they
	// keep the stored one), or as typed after a refusal.
	SlackWebhookURL, TeamsWebhookURL string
	Events                           []Check // notifyOnFirstFailure, …
	DigestThreshold                  string
	// NotifyPer are the choices of notifyPer: per failure group (default) or per failure.
	NotifyPer []Check
	// Errors are field messages by field name; FormError the message of the whole form.
	Errors    map[string]string
	FormError string
	// ForWorkflow: the form of one workflow's settings (no digest threshold, which is the
	// organization's); UseDefaults: the workflow sets nothing of its own.
	ForWorkflow bool
	UseDefaults bool
}

// NotifyWorkflowVM feeds NotifyWorkflowSettings: one workflow's notification settings,
// saved into its definition (a new version).
type NotifyWorkflowVM struct {
	WorkflowName, WorkflowURL, OrgSettingsURL string
	Version                                   int
	Form                                      NotifySettingsForm
	CSRF                                      string
}

// Check is one checkbox of a group.
type Check struct {
	Name, Value, Label, Hint string
	Checked                  bool
}

// NotifyTest is a channel's "send a test notification" button and its last result (the
// fragment the button swaps in, #notify-test-<channel>).
type NotifyTest struct {
	Channel, Label, URL string
	Status              string // "" (not sent), "ok" or "failed"
	Message             string // what was sent where, or the exact error
	Live                bool   // a result that just arrived (announced)
}

// NotifyDeliveriesVM feeds NotifyDeliveries (the delivery log, admins).
type NotifyDeliveriesVM struct {
	Filter NotifyDeliveriesFilter
	Rows   []NotifyDeliveryRow
	// Error and FieldErrors say why the filter was refused (422), in place of rows.
	Error       string
	FieldErrors map[string]string
	Filtered    bool
	NextURL     string // the next page ("" on the last)
	CSRF        string
	Back        []HiddenField // the filter, to come back to after a resend
	Done        string        // "resent": a confirmation
	SettingsURL string
	// ExecutionURL links the execution the log is filtered by.
	ExecutionURL string
}

// NotifyDeliveriesFilter is the GET filter form of the log: executionId, channel, status.
type NotifyDeliveriesFilter struct {
	Action      string
	ExecutionID string
	Channels    []Option
	Statuses    []Option
	Errors      map[string]string
}

// NotifyDeliveryRow is one delivery.
type NotifyDeliveryRow struct {
	ID, Channel, ChannelLabel string
	Recipient                 string // address, user's email, or a masked webhook URL
	Event, EventLabel         string
	Status, StatusLabel       string
	Attempts                  int
	LastError                 string
	CreatedAt, CreatedAtText  string
	SentAt, SentAtText        string
	NextAt, NextAtText        string
	ExecutionURL, ExecutionID string
	Subject                   string // the execution's subject (the client), "" without one
	ResendURL                 string // "" when it cannot be sent again now
}

// NotifyInboxVM feeds NotifyInbox (the user's in-app notifications).
type NotifyInboxVM struct {
	Items       []NotifyItem
	Unread      int
	UnreadText  string
	ReadAllURL  string
	CSRF        string
	RefreshURL  string
	SettingsURL string // admins: the settings and the delivery log
	LogURL      string
}

// NotifyItem is one in-app notification.
type NotifyItem struct {
	ID, Title, Body, Link  string
	Kind                   string   // what happened ("Dead-letter queue"), "" for a digest or a test
	KindTone               string   // its badge's tone: danger, warn
	Facts                  []string // the workflow, the step
	ErrorType              string
	At, AtText, AtRelative string
	Unread                 bool
	ReadURL                string
}

// NotifyCardVM is the workflow page's card of effective notification settings.
type NotifyCardVM struct {
	Enabled    bool
	Channels   string // "email, in-app"
	Recipients string
	Events     string // "retries exhausted, dead-letter queue"
	NotifyPer  string // "once per problem" or "on every failure"
	// NotifyPerValue is the setting's value (group, failure).
	NotifyPerValue string
	Overridden     []string
	SettingsURL    string // admins: the organization's settings
	EditURL        string // admins: this workflow's own settings
}

// deliveryTone colours a delivery status.
func deliveryTone(status string) string {
	switch status {
	case "sent":
		return "ok"
	case "failed":
		return "danger"
	case "pending", "sending":
		return "info"
	}
	return "neutral"
}

// shortUUID is the first block of an id, for a compact link (the full id is in the URL).
func shortUUID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// workflowNotificationsURL is the route "workflow.notifications" (handlers/routes.go) of a
// workflow: views cannot reverse routes, and WorkflowVM is filled by the workflow page's
// handler; the handlers' tests load the card from the URL the page renders.
func workflowNotificationsURL(workflowID string) string {
	return "/workflows/" + url.PathEscape(workflowID) + "/notifications"
}

// NotifyFailuresVM feeds NotifyFailures: exactly the failures a digest or a failure group's
// follow-up stands for.
type NotifyFailuresVM struct {
	CountText string // "90 executions"
	Rows      []NotifyFailure
}

// NotifyFailure is one failure of a notification's list.
type NotifyFailure struct {
	Execution, ExecutionURL, ItemURL string
	Subject, Reason                  string
	At, AtText                       string
}
