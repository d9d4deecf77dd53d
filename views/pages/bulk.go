package pages

// BulkVM feeds Bulk: the progress and results of a bulk action on dead letters.
type BulkVM struct {
	ID        string
	Action    string // retry, retry_full, skip, resolve
	Status    string // queued, running, done, cancelled
	Total     int
	Processed int
	Succeeded int
	Failed    int
	Percent   int
	Live      bool // queued or running, or retries it started still running: the page refreshes itself
	// Summary says how the items ended once every retry did ("fixed 31 · back in the queue 4
	// · refused 1"); "" while any runs, and for resolve and skip.
	Summary       string
	RefreshURL    string
	CancelURL     string // empty when it cannot be cancelled
	CSRF          string
	ListURL       string
	CreatedAt     string
	CreatedAtText string
	// Waiting says how many items wait for their target's circuit breaker ("" for none).
	Waiting string
	// Items is a page of the items; FirstURL and NextURL page them ("" when there is none),
	// Filters show the items of one status (with their counts), AllURL every status again.
	Items             []BulkItemVM
	FirstURL, NextURL string
	Filters           []BulkFilter
	AllURL            string
}

// BulkFilter is a link to a bulk job's items of one status.
type BulkFilter struct {
	Status  string
	Count   int
	URL     string
	Current bool
}

// BulkItemVM is one dead letter of a bulk action and what happened to it.
type BulkItemVM struct {
	URL          string
	Label        string
	Status       string // pending, waiting, done, failed, skipped
	ItemStatus   string // the dead letter's status now (a retry that ran may have failed again)
	Message      string
	ExecutionURL string
}

// BulkBar is the bulk-action form above the dead-letter list (admins): the selected rows'
// checkboxes (name "ids") belong to it, or every pending item of the filter ("all").
type BulkBar struct {
	Action string
	CSRF   string
	// CanSettle: resolve and skip are offered (admins; accountants unless the organization
	// keeps closing items to its admins: then AdminOnly says who can).
	CanSettle bool
	AdminOnly bool
	// Fields are the list's filter as query keys, sent along for "every matching item"
	// (rendered inside the table fragment, so a filter change updates them).
	Fields []HiddenField
}

// HiddenField is a name and value sent with a form.
type HiddenField struct{ Name, Value string }

// bulkItemKey is the message of an item's result: for a retry, "done" means the replay
// started (how it ended is the item's status now).
func bulkItemKey(action, status string) string {
	if action == "retry" && status == "done" {
		return "bulk.item.started"
	}
	return "bulk.item." + status
}

// bulkCountsKey is the message of the counts: a retry's successes are replays started.
func bulkCountsKey(action string) string {
	if action == "retry" {
		return "bulk.counts.retry"
	}
	return "bulk.counts"
}

// BulkConfirmVM feeds BulkConfirm: what a bulk action from the list will do, before it
// starts; or why it cannot (Problems).
type BulkConfirmVM struct {
	Action   string // retry, retry_full, skip, resolve
	Count    int    // the items it acts on
	ByFilter bool   // every pending item of the filter, not the selected ones
	Problems []string
	PostURL  string
	CSRF     string
	BackURL  string        // the list, with its filter
	Fields   []HiddenField // the list form's fields, sent again with confirm=1
	Notes    string
	Items    []BulkConfirmItem // the first items it acts on
	More     string            // "and 180 more", "" when Items names them all
	// LeftAlone: the selected items no longer pending, which it leaves alone ("" for none).
	LeftAlone string
	// Refusals says beforehand how many items the action will be refused for, and why ("" for
	// none): a retry from the failed step of rolled-back executions.
	Refusals string
	// Token identifies the items shown, Nonce this confirmation (a double click is one job).
	Token, Nonce string
	// Changed: the items changed since the person confirmed; this is the new set.
	Changed bool
	// Group: the items are a failure group's pending ones (the count says "exactly N of
	// this group now"). Edit says what an edit_retry changes ("" otherwise).
	Group bool
	Edit  string
}

// BulkConfirmItem is an item a bulk action will act on.
type BulkConfirmItem struct{ URL, Label, Status string }
