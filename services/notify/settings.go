package notify

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/mail"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"lifeline/models"
)

// Channel is a way of telling people.
type Channel string

// Channels.
const (
	Email Channel = "email"
	App   Channel = "app"
	Slack Channel = "slack"
	Teams Channel = "teams"
)

// Channels lists every channel.
var Channels = []Channel{Email, App, Slack, Teams}

// Defaults (seed 000's errorNotificationConfigSchema, plus Lifeline's own).
const (
	// DefaultDigestThreshold is how many messages a minute one recipient gets for one
	// workflow on one channel before the rest of the minute becomes one digest.
	DefaultDigestThreshold = 10
	// MaxRecipients bounds the recipients list.
	MaxRecipients = 50
)

// DefaultRecipients are the in-app and email recipients when none are configured.
var DefaultRecipients = []string{"role:" + models.RoleAdmin, "role:" + models.RoleAccountant}

// Settings are a workflow's settings.errorNotifications, or an organization's defaults
// (seed 000's errorNotificationConfigSchema plus notifyOnBreakerOpen and, for the
// organization, digestThresholdPerMinute).
//
// Recipients are email addresses and roles ("role:admin", "role:accountant", …; "role:admin"
// also matches owners). Email goes to the addresses and to the members with the roles; in-app
// notifications to the members with the roles or the addresses. None: DefaultRecipients.
type Settings struct {
	Enabled                bool      `json:"enabled"`
	Channels               []Channel `json:"channels"`
	Recipients             []string  `json:"recipients"`
	SlackWebhookURL        string    `json:"slackWebhookUrl,omitempty"`
	TeamsWebhookURL        string    `json:"teamsWebhookUrl,omitempty"`
	NotifyOnFirstFailure   bool      `json:"notifyOnFirstFailure"`
	NotifyOnRetryExhausted bool      `json:"notifyOnRetryExhausted"`
	NotifyOnDLQ            bool      `json:"notifyOnDLQ"`
	NotifyOnBreakerOpen    bool      `json:"notifyOnBreakerOpen"`
	// DigestThreshold is the organization's (a workflow cannot set it).
	DigestThreshold int `json:"digestThresholdPerMinute"`
	// NotifyPer is "group" (default: a dead letter notifies once for its failure group, the
	// group's later items update that notification and send at most one follow-up an hour)
	// or "failure" (every dead letter notifies, folded into digests in a storm).
	NotifyPer string `json:"notifyPer"`
}

// NotifyPer values.
const (
	PerGroup   = models.NotifyPerGroup
	PerFailure = models.NotifyPerFailure
)

// DefaultSettings are seed 000's defaults.
func DefaultSettings() Settings {
	return Settings{Enabled: true, Channels: []Channel{Email, App}, NotifyOnRetryExhausted: true, NotifyOnDLQ: true,
		DigestThreshold: DefaultDigestThreshold, NotifyPer: PerGroup}
}

// FieldPrefix is the path of the settings in a definition; ParseSettings keys its field
// messages under it.
const FieldPrefix = "settings.errorNotifications"

// ParseSettings validates a definition's settings.errorNotifications and returns them
// with seed 000's defaults for the keys it does not set. Field messages are keyed like
// "settings.errorNotifications.slackWebhookUrl"; none means valid. allow is
// LIFELINE_OUTBOUND_ALLOW: a webhook URL whose address it allows is accepted as it is (http
// included); otherwise see ValidateWebhookURL. nil or null raw is the defaults.
func ParseSettings(raw json.RawMessage, allow ...netip.Prefix) (Settings, map[string]string) {
	s, _, fields := parseSettings(raw, FieldPrefix, false, allow)
	return s, fields
}

// ParseOrgSettings validates an organization's defaults as the API takes them (the same
// keys plus digestThresholdPerMinute), with field messages keyed by the bare key.
func ParseOrgSettings(raw json.RawMessage, allow ...netip.Prefix) (Settings, map[string]string) {
	s, _, fields := parseSettings(raw, "", true, allow)
	return s, fields
}

func key(prefix, k string) string {
	if prefix == "" {
		return k
	}
	return prefix + "." + k
}

// parseSettings returns the settings, which keys raw sets, and field messages.
func parseSettings(raw json.RawMessage, prefix string, org bool, allow []netip.Prefix) (Settings, map[string]bool, map[string]string) {
	s := DefaultSettings()
	set := map[string]bool{}
	fields := map[string]string{}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return s, set, nil
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(raw, &doc); err != nil {
		name := prefix
		if name == "" {
			name = "settings"
		}
		fields[name] = "must be an object"
		return s, set, fields
	}
	boolean := func(k string, dst *bool) {
		if err := json.Unmarshal(doc[k], dst); err != nil || string(doc[k]) == "null" {
			fields[key(prefix, k)] = "must be true or false"
		}
	}
	for k, v := range doc {
		set[k] = true
		switch k {
		case "enabled":
			boolean(k, &s.Enabled)
		case "notifyOnFirstFailure":
			boolean(k, &s.NotifyOnFirstFailure)
		case "notifyOnRetryExhausted":
			boolean(k, &s.NotifyOnRetryExhausted)
		case "notifyOnDLQ":
			boolean(k, &s.NotifyOnDLQ)
		case "notifyOnBreakerOpen":
			boolean(k, &s.NotifyOnBreakerOpen)
		case "channels":
			var cs []string
			if err := json.Unmarshal(v, &cs); err != nil || cs == nil {
				fields[key(prefix, k)] = "must be a list of email, app, slack, teams"
				continue
			}
			s.Channels = nil
			for _, c := range cs {
				if !slices.Contains(Channels, Channel(c)) {
					fields[key(prefix, k)] = fmt.Sprintf("unknown channel %q: use email, app, slack or teams", c)
					break
				}
				if !slices.Contains(s.Channels, Channel(c)) {
					s.Channels = append(s.Channels, Channel(c))
				}
			}
		case "recipients":
			var rs []string
			if err := json.Unmarshal(v, &rs); err != nil {
				fields[key(prefix, k)] = "must be a list of email addresses and roles (role:admin)"
				continue
			}
			if len(rs) > MaxRecipients {
				fields[key(prefix, k)] = fmt.Sprintf("at most %d recipients", MaxRecipients)
				continue
			}
			s.Recipients = nil
			for i, r := range rs {
				r = strings.TrimSpace(r)
				if msg := checkRecipient(r); msg != "" {
					fields[key(prefix, k)+"["+strconv.Itoa(i)+"]"] = msg
					continue
				}
				if !slices.Contains(s.Recipients, r) {
					s.Recipients = append(s.Recipients, r)
				}
			}
		case "slackWebhookUrl", "teamsWebhookUrl":
			var u string
			if err := json.Unmarshal(v, &u); err != nil {
				fields[key(prefix, k)] = "must be a URL"
				continue
			}
			u = strings.TrimSpace(u)
			ch := Slack
			if k == "teamsWebhookUrl" {
				ch = Teams
			}
			if u != "" {
				if err := ValidateWebhookURL(ch, u, allow); err != nil {
					fields[key(prefix, k)] = err.Error()
					continue
				}
			}
			if ch == Slack {
				s.SlackWebhookURL = u
			} else {
				s.TeamsWebhookURL = u
			}
		case "notifyPer":
			var p string
			if err := json.Unmarshal(v, &p); err != nil || (p != PerGroup && p != PerFailure) {
				fields[key(prefix, k)] = "must be group or failure"
				continue
			}
			s.NotifyPer = p
		case "digestThresholdPerMinute":
			if !org {
				fields[key(prefix, k)] = "is set for the organization only"
				continue
			}
			var n int
			if err := json.Unmarshal(v, &n); err != nil || n < 1 || n > 10000 {
				fields[key(prefix, k)] = "must be a whole number from 1 to 10000"
				continue
			}
			s.DigestThreshold = n
		default:
			fields[key(prefix, k)] = "unknown setting"
		}
	}
	for _, c := range s.Channels {
		if c == Slack && s.SlackWebhookURL == "" && (org || set["slackWebhookUrl"]) {
			fields[key(prefix, "slackWebhookUrl")] = "is required for the slack channel"
		}
		if c == Teams && s.TeamsWebhookURL == "" && (org || set["teamsWebhookUrl"]) {
			fields[key(prefix, "teamsWebhookUrl")] = "is required for the teams channel"
		}
	}
	if len(fields) == 0 {
		fields = nil
	}
	return s, set, fields
}

// checkRecipient returns the message of a recipient that is neither an address nor a role.
func checkRecipient(r string) string {
	if role, ok := strings.CutPrefix(r, "role:"); ok {
		if !slices.Contains(models.Roles, role) {
			return fmt.Sprintf("unknown role %q: use role:owner, role:admin, role:accountant or role:viewer", role)
		}
		return ""
	}
	a, err := mail.ParseAddress(r)
	if err != nil || a.Address != r || len(r) > 320 {
		return fmt.Sprintf("%q is neither an email address nor a role (role:admin)", r)
	}
	return ""
}

// merge returns the organization's defaults o with what a workflow's settings w set.
func merge(o, w Settings, set map[string]bool) Settings {
	out := o
	if set["enabled"] {
		out.Enabled = w.Enabled
	}
	if set["channels"] {
		out.Channels = w.Channels
	}
	if set["recipients"] {
		out.Recipients = w.Recipients
	}
	if set["slackWebhookUrl"] && w.SlackWebhookURL != "" {
		out.SlackWebhookURL = w.SlackWebhookURL
	}
	if set["teamsWebhookUrl"] && w.TeamsWebhookURL != "" {
		out.TeamsWebhookURL = w.TeamsWebhookURL
	}
	if set["notifyOnFirstFailure"] {
		out.NotifyOnFirstFailure = w.NotifyOnFirstFailure
	}
	if set["notifyOnRetryExhausted"] {
		out.NotifyOnRetryExhausted = w.NotifyOnRetryExhausted
	}
	if set["notifyOnDLQ"] {
		out.NotifyOnDLQ = w.NotifyOnDLQ
	}
	if set["notifyOnBreakerOpen"] {
		out.NotifyOnBreakerOpen = w.NotifyOnBreakerOpen
	}
	if set["notifyPer"] {
		out.NotifyPer = w.NotifyPer
	}
	return out
}

// SettingsFromRow are an organization's stored defaults (DefaultSettings for nil).
func SettingsFromRow(r *models.NotificationSettings) Settings {
	if r == nil {
		return DefaultSettings()
	}
	s := Settings{Enabled: r.Enabled, Recipients: r.Recipients, SlackWebhookURL: r.SlackWebhookURL, TeamsWebhookURL: r.TeamsWebhookURL,
		NotifyOnFirstFailure: r.NotifyOnFirstFailure, NotifyOnRetryExhausted: r.NotifyOnRetryExhausted, NotifyOnDLQ: r.NotifyOnDLQ,
		NotifyOnBreakerOpen: r.NotifyOnBreakerOpen, DigestThreshold: r.DigestThreshold, NotifyPer: r.NotifyPer}
	for _, c := range r.Channels {
		s.Channels = append(s.Channels, Channel(c))
	}
	if s.DigestThreshold < 1 {
		s.DigestThreshold = DefaultDigestThreshold
	}
	if s.NotifyPer != PerFailure {
		s.NotifyPer = PerGroup
	}
	return s
}

// Masked returns s with the webhook URLs masked (scheme and host), for display.
func (s Settings) Masked() Settings {
	// None is an empty list, never null: a client iterates it without a check.
	if s.Channels == nil {
		s.Channels = []Channel{}
	}
	if s.Recipients == nil {
		s.Recipients = []string{}
	}
	s.SlackWebhookURL = models.MaskWebhookURL(s.SlackWebhookURL)
	s.TeamsWebhookURL = models.MaskWebhookURL(s.TeamsWebhookURL)
	return s
}

// Webhook hosts accepted without LIFELINE_OUTBOUND_ALLOW (https only).
var (
	slackHosts = []string{"hooks.slack.com"}
	// teamsSuffixes are the Workflows (Power Automate) webhook hosts, e.g.
	// prod-12.westeurope.logic.azure.com and xxx.environment.api.powerplatform.com.
	teamsSuffixes = []string{".logic.azure.com", ".api.powerplatform.com"}
)

// ValidateWebhookURL checks a webhook URL when it is saved. A URL whose host is an address
// (in any spelling: decimal, octal, hex, IPv4-mapped IPv6; or "localhost") inside allow
// (LIFELINE_OUTBOUND_ALLOW) is accepted as it is, http included, unless it is link-local or
// a cloud metadata address. Otherwise the URL must be https, without credentials, on Slack's
// host (hooks.slack.com) for Slack, or a Teams Workflows host (*.logic.azure.com,
// *.api.powerplatform.com) for Teams; any other address is refused. The SSRF guard checks
// the resolved address again at dial time (services/outbound).
func ValidateWebhookURL(ch Channel, raw string, allow []netip.Prefix) error {
	if len(raw) > 2000 {
		return fmt.Errorf("is too long (at most 2000 characters)")
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return fmt.Errorf("must be an https URL")
	}
	if u.User != nil {
		return fmt.Errorf("must not contain credentials")
	}
	host := strings.ToLower(u.Hostname())
	if addrs, ok := hostAddrs(host); ok {
		for _, a := range addrs {
			if alwaysDenied(a) || !inAllow(a, allow) {
				return fmt.Errorf("points at an address that is not allowed (%s)", a)
			}
		}
		return nil
	}
	if u.Scheme != "https" {
		return fmt.Errorf("must be an https URL")
	}
	switch ch {
	case Slack:
		if !slices.Contains(slackHosts, host) {
			return fmt.Errorf("must be a Slack webhook (https://hooks.slack.com/…)")
		}
	case Teams:
		ok := false
		for _, s := range teamsSuffixes {
			ok = ok || strings.HasSuffix(host, s)
		}
		if !ok {
			return fmt.Errorf("must be a Teams Workflows webhook (https://….logic.azure.com/… or ….api.powerplatform.com/…)")
		}
	default:
		return fmt.Errorf("no webhook for channel %s", ch)
	}
	return nil
}

// hostAddrs returns the addresses a URL host names literally, in the spellings a resolver
// accepts (inet_aton: 2130706433, 0x7f.1, 0177.0.0.1; IPv6; IPv4-mapped), and localhost.
func hostAddrs(host string) ([]netip.Addr, bool) {
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		// The guard checks what it resolves to when it is dialled.
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, true
	}
	if i := strings.IndexByte(host, '%'); i >= 0 {
		host = host[:i]
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a.Unmap()}, true
	}
	if a, ok := parseInetAton(host); ok {
		return []netip.Addr{a}, true
	}
	return nil, false
}

// parseInetAton reads the IPv4 forms of inet_aton: 1 to 4 parts, each decimal, octal
// (leading 0) or hex (0x); the last part fills the remaining bytes.
func parseInetAton(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) > 4 || s == "" {
		return netip.Addr{}, false
	}
	var vals []uint64
	for _, p := range parts {
		if p == "" {
			return netip.Addr{}, false
		}
		v, err := strconv.ParseUint(p, 0, 32)
		if err != nil {
			// strconv's base 0 reads "0x", "0o", "0b" and a leading "0" as octal.
			return netip.Addr{}, false
		}
		vals = append(vals, v)
	}
	var ip uint64
	n := len(vals)
	for i := 0; i < n-1; i++ {
		if vals[i] > 255 {
			return netip.Addr{}, false
		}
		ip |= vals[i] << (8 * (3 - i))
	}
	if vals[n-1] >= 1<<(8*(5-n)) {
		return netip.Addr{}, false
	}
	ip |= vals[n-1]
	return netip.AddrFrom4([4]byte{byte(ip >> 24), byte(ip >> 16), byte(ip >> 8), byte(ip)}), true
}

var (
	deniedPrefixes = []netip.Prefix{
		netip.MustParsePrefix("169.254.0.0/16"), netip.MustParsePrefix("fe80::/10"),
		netip.MustParsePrefix("fd00:ec2::254/128"), netip.MustParsePrefix("100.100.100.200/32"),
		netip.MustParsePrefix("0.0.0.0/8"),
	}
	nat64 = netip.MustParsePrefix("64:ff9b::/96")
)

func alwaysDenied(a netip.Addr) bool {
	a = a.Unmap()
	if nat64.Contains(a) {
		b := a.As16()
		a = netip.AddrFrom4([4]byte(b[12:]))
	}
	for _, p := range deniedPrefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func inAllow(a netip.Addr, allow []netip.Prefix) bool {
	for _, p := range allow {
		if p.Contains(a.Unmap()) {
			return true
		}
	}
	return false
}
