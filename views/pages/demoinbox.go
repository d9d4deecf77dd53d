package pages

// DemoInboxVM feeds DemoInbox: what the demo's stand-ins for a mail server and for Slack's and
// Teams' webhooks received from Lifeline, newest first.
type DemoInboxVM struct {
	Emails []DemoEmail
	Hooks  []DemoHook
	// DeliveriesURL is the delivery log.
	DeliveriesURL string
	// KSeFToken is the new KSeF token the portal issued to the office (its old one expired),
	// for the admin to upload at CredentialsURL under CredentialName.
	KSeFToken, CredentialName, CredentialsURL string
}

// DemoEmail is one email the demo's SMTP server received.
type DemoEmail struct {
	At, AtText  string
	To, Subject string
	Lang        string
	Text        string
}

// DemoHook is one message posted to the Slack or Teams stand-in.
type DemoHook struct {
	At, AtText string
	Channel    string // "slack" or "teams"
	Summary    string // the message's text (Slack) or its card's first text (Teams)
	JSON       string // the payload, indented
}
