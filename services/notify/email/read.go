package email

import (
	"encoding/base64"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"strings"
	"time"
)

// Read is a received message as a person reads it: headers decoded, the plain-text part.
type Read struct {
	From, To, Subject string
	Date              time.Time
	Lang              string
	Text              string
}

// Read decodes the message m (what a Sink received): its subject (RFC 2047), date, language
// and plain-text part (quoted-printable or base64, inside multipart/alternative or not).
// A message it cannot parse is returned with the raw data as its text.
func (m Received) Read() Read {
	r := Read{From: m.From, To: strings.Join(m.To, ", "), Text: string(m.Data)}
	msg, err := mail.ReadMessage(strings.NewReader(string(m.Data)))
	if err != nil {
		return r
	}
	dec := new(mime.WordDecoder)
	if s, err := dec.DecodeHeader(msg.Header.Get("Subject")); err == nil {
		r.Subject = s
	}
	r.Date, _ = msg.Header.Date()
	r.Lang = msg.Header.Get("Content-Language")
	if text, ok := plainText(msg.Header.Get("Content-Type"), msg.Header.Get("Content-Transfer-Encoding"), msg.Body); ok {
		r.Text = text
	}
	return r
}

// plainText finds the text/plain part of a body with the given content type.
func plainText(contentType, encoding string, body io.Reader) (string, bool) {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		mt = "text/plain"
	}
	if strings.HasPrefix(mt, "multipart/") {
		mr := multipart.NewReader(body, params["boundary"])
		for {
			p, err := mr.NextRawPart()
			if err != nil {
				return "", false
			}
			if text, ok := plainText(p.Header.Get("Content-Type"), p.Header.Get("Content-Transfer-Encoding"), p); ok {
				return text, true
			}
		}
	}
	if mt != "text/plain" {
		return "", false
	}
	switch strings.ToLower(encoding) {
	case "quoted-printable":
		body = quotedprintable.NewReader(body)
	case "base64":
		body = base64.NewDecoder(base64.StdEncoding, body)
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return "", false
	}
	return strings.ReplaceAll(string(b), "\r\n", "\n"), true
}
