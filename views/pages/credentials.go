package pages

// CredentialsVM feeds Credentials (the admins' organization credentials page).
type CredentialsVM struct {
	Rows []CredentialRow
	// Form adds a credential or replaces one's value (by name).
	Form CredentialForm
	// Done confirms what just happened: "created", "replaced", "deleted" or "" (nothing);
	// DoneName names the credential.
	Done, DoneName string
	// Template is how a step reads a credential ("{{ credentials.ksefToken }}"), for the lead.
	Template string
	// CSRF is the token of the rows' forms.
	CSRF string
}

// CredentialRow is one credential. It never holds the value: only its last characters.
type CredentialRow struct {
	ID, Name string
	// Masked is the value as shown: dots and its last four characters.
	Masked string
	// Changed, ChangedText and ChangedRelative are when the value was last saved (ISO,
	// display, "3 minutes ago").
	Changed, ChangedText, ChangedRelative string
	// ReplaceURL opens the form with the name filled in; DeleteURL deletes it.
	ReplaceURL, DeleteURL string
	// Fresh marks the row just saved.
	Fresh bool
}

// CredentialForm adds or replaces a credential. The value is never put back in the form.
type CredentialForm struct {
	Action string
	Name   string
	// Replacing says Name is a credential that exists: saving replaces its value.
	Replacing bool
	// Retype says the value that was sent is not shown again and must be typed again.
	Retype    bool
	Errors    map[string]string
	FormError string
}
