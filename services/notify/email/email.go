// Package email sends notifications by SMTP (github.com/wneessen/go-mail): an HTML part and
// a plain-text alternative, a Message-ID derived from the delivery's dedup key (a resend
// after a crash carries the same one, so a mail server or client can drop the duplicate).
//
// Errors: a rejected address or a 5xx answer is permanent (notify.DeliveryError); a
// connection failure or a 4xx answer is transient.
package email

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/mail"
	"net/url"
	"strconv"
	"strings"
	"time"

	gomail "github.com/wneessen/go-mail"

	"lifeline/services/notify"
	"lifeline/services/outbound"
)

// TLS modes of LIFELINE_SMTP_URL's tls parameter.
const (
	TLSNone     = "none"
	TLSStartTLS = "starttls"
	TLSImplicit = "tls"
)

// Config is the SMTP server and the sender address.
type Config struct {
	Host     string
	Port     int
	Username string
	Password string
	TLS      string // none, starttls, tls
	From     string
	Timeout  time.Duration
}

// ParseURL reads LIFELINE_SMTP_URL: smtp://user:pass@host:587?tls=starttls (tls = none,
// starttls or tls; default starttls; the port defaults to 25, 587 or 465 by it).
func ParseURL(raw string) (Config, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "smtp" || u.Hostname() == "" {
		return Config{}, errors.New("must look like smtp://user:pass@host:587?tls=starttls")
	}
	c := Config{Host: u.Hostname(), TLS: strings.ToLower(u.Query().Get("tls"))}
	if c.TLS == "" {
		c.TLS = TLSStartTLS
	}
	switch c.TLS {
	case TLSNone:
		c.Port = 25
	case TLSStartTLS:
		c.Port = 587
	case TLSImplicit:
		c.Port = 465
	default:
		return Config{}, fmt.Errorf("tls=%s: use none, starttls or tls", c.TLS)
	}
	if p := u.Port(); p != "" {
		if c.Port, err = strconv.Atoi(p); err != nil || c.Port < 1 || c.Port > 65535 {
			return Config{}, fmt.Errorf("port %q is not a port number", p)
		}
	}
	if u.User != nil {
		c.Username = u.User.Username()
		c.Password, _ = u.User.Password()
	}
	return c, nil
}

// ParseFrom checks LIFELINE_SMTP_FROM ("Lifeline <alerts@example.com>" or an address).
func ParseFrom(s string) error {
	_, err := mail.ParseAddress(s)
	return err
}

// Sender sends email notifications.
type Sender struct{ cfg Config }

var _ notify.Sender = (*Sender)(nil)

// New returns a Sender for cfg.
func New(cfg Config) *Sender {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 20 * time.Second
	}
	return &Sender{cfg: cfg}
}

// Addr is the server's host:port, for messages.
func (s *Sender) Addr() string { return net.JoinHostPort(s.cfg.Host, strconv.Itoa(s.cfg.Port)) }

// MessageID derives a message id from a dedup key.
func MessageID(dedup string) string {
	sum := sha256.Sum256([]byte(dedup))
	return hex.EncodeToString(sum[:16]) + "@lifeline"
}

// Send sends m to m.To.
func (s *Sender) Send(ctx context.Context, m notify.Message) error {
	msg := gomail.NewMsg()
	if err := msg.From(s.cfg.From); err != nil {
		return notify.Permanentf("the sender address %q is not valid: %v", s.cfg.From, err)
	}
	if err := msg.To(m.To); err != nil {
		return notify.Permanentf("the address %q is not valid: %v", m.To, err)
	}
	msg.Subject(m.Title)
	if m.DedupKey != "" {
		msg.SetMessageIDWithValue(MessageID(m.DedupKey))
	} else {
		msg.SetMessageID()
	}
	msg.SetDate()
	msg.SetGenHeader(gomail.HeaderContentLang, m.Lang)
	msg.SetGenHeader("Auto-Submitted", "auto-generated")
	msg.SetBodyString(gomail.TypeTextPlain, m.Text)
	if m.HTML != "" {
		msg.AddAlternativeString(gomail.TypeTextHTML, m.HTML)
	}
	opts := []gomail.Option{gomail.WithPort(s.cfg.Port), gomail.WithTimeout(s.cfg.Timeout)}
	switch s.cfg.TLS {
	case TLSNone:
		opts = append(opts, gomail.WithTLSPortPolicy(gomail.NoTLS))
	case TLSImplicit:
		opts = append(opts, gomail.WithSSLPort(false))
	default:
		opts = append(opts, gomail.WithTLSPortPolicy(gomail.TLSMandatory))
	}
	if s.cfg.Username != "" {
		auth := gomail.SMTPAuthPlain
		if s.cfg.TLS == TLSNone {
			auth = gomail.SMTPAuthPlainNoEnc
		}
		opts = append(opts, gomail.WithSMTPAuth(auth), gomail.WithUsername(s.cfg.Username), gomail.WithPassword(s.cfg.Password))
	}
	c, err := gomail.NewClient(s.cfg.Host, opts...)
	if err != nil {
		return notify.Permanentf("smtp client: %v", err)
	}
	if err := c.DialAndSendWithContext(ctx, msg); err != nil {
		// Named by the server's host as configured, never the address it resolved to.
		return classify(outbound.Describe(s.Addr(), err))
	}
	return nil
}

// classify: a 5xx answer or a rejected recipient is permanent; everything else transient.
func classify(err error) error {
	var se *gomail.SendError
	if errors.As(err, &se) {
		if !se.IsTemp() && (se.ErrorCode() >= 500 || se.Reason == gomail.ErrSMTPRcptTo) {
			return &notify.DeliveryError{Permanent: true, Err: err}
		}
	}
	return notify.Transient(err, 0)
}
