// Package fingerprint says which failures are the same problem. [Normalize] turns a failure's
// reason into a template: its variable parts (numbers, amounts, dates, periods, UUIDs, e-mail
// addresses, URLs' ids, hex, quoted strings and the Polish identifiers NIP, REGON, PESEL,
// IBAN/NRB, KSeF numbers and invoice numbers) replaced by a placeholder, "…". [Of] hashes the
// workflow, the failed step, the error type and code, that template and the rules' [Version]
// into the failure's fingerprint.
//
// The contract: two failures of one step of one workflow with the same type and code whose
// reasons differ only in what the rules replace have one fingerprint; a different workflow,
// step, type, code or wording gives another. The rules are a table ([Rules]) applied in order.
// Changing them changes [Version], and the version is part of the fingerprint: failures
// fingerprinted under the new rules gather in new groups, and groups made under the old ones
// keep what they have (nothing is moved silently).
//
// The package imports nothing of Lifeline's.
package fingerprint

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Version is the version of [Rules]: raise it with every change to them.
const Version = 1

// Placeholder stands for a replaced variable part in a template.
const Placeholder = "…"

// MaxTemplateRunes bounds a template (and so a group's title).
const MaxTemplateRunes = 300

// A Rule replaces one kind of variable part.
type Rule struct {
	// Name says what the rule replaces (in tests and documentation).
	Name string
	// Re finds the parts.
	Re *regexp.Regexp
	// Need, when set, is a set of bytes of which a reason must hold one for Re to run at
	// all: a cheap test that skips most rules on most reasons.
	Need string
	// Replace, when set, decides a match's replacement (returning the match keeps it);
	// otherwise the match becomes Placeholder.
	Replace func(match string) string
	// Standalone keeps a match that touches a letter (the 2 of "OAuth2", the 3 of "S3").
	Standalone bool
	// Keep keeps the match as it is, and hides it from the rules after it.
	Keep bool
}

const digits = "0123456789"

// Rules are the normalizer's rules, the most specific first (a URL before the numbers in it,
// a quoted string before the identifiers in it).
var Rules = []Rule{
	// An HTTP status as the classifier writes it after a service's message ("(400 Bad
	// Request)"): part of the wording, and a reader (and the Polish rendering) wants it whole.
	{Name: "httpstatus", Need: "(", Re: regexp.MustCompile(`\((?:HTTP )?[1-5]\d\d [A-Z][A-Za-z' \-]*\)`), Keep: true},
	{Name: "url", Need: ":", Re: regexp.MustCompile(`(?i)\b(?:https?|ftp|sftp|wss?)://[^\s"'„”«»<>]+`), Replace: url},
	{Name: "email", Need: "@", Re: regexp.MustCompile(`[\p{L}\p{N}._%+\-]+@[\p{L}\p{N}\-]+(?:\.[\p{L}\p{N}\-]+)+`)},
	{Name: "quoted", Need: "\"'`„“«", Re: regexp.MustCompile("„[^”\n]*”|“[^”\n]*”|«[^»\n]*»|\"[^\"\n]*\"|'[^'\n]*'|`[^`\n]*`"), Replace: quoted},
	{Name: "uuid", Need: "-", Re: regexp.MustCompile(`(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`)},
	{Name: "ksef", Need: "-", Re: regexp.MustCompile(`(?i)\b\d{10}-\d{8}-[0-9a-f]{6,16}-[0-9a-f]{2}\b`)},
	{Name: "iban", Need: digits, Re: regexp.MustCompile(`(?i)\b(?:[a-z]{2})?\d{2}(?:[ \x{00A0}]?\d{4}){6}\b`)},
	{Name: "invoice", Need: "/", Re: regexp.MustCompile(`\b[\p{L}]{0,6}[/\-]?\d+(?:/[0-9\p{L}]+)+\b`), Replace: hasDigit},
	{Name: "datetime", Need: "-", Re: regexp.MustCompile(`\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+\-]\d{2}:?\d{2})?)?\b`)},
	{Name: "date", Need: ".", Re: regexp.MustCompile(`\b\d{1,2}\.\d{1,2}\.\d{4}(?:\s+\d{1,2}:\d{2}(?::\d{2})?)?\b`)},
	{Name: "period", Need: "-", Re: regexp.MustCompile(`(?i)\b\d{4}-(?:0[1-9]|1[0-2]|q[1-4]|h[12])\b`)},
	{Name: "time", Need: ":", Re: regexp.MustCompile(`\b\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?\b`)},
	{Name: "nip", Need: "-", Re: regexp.MustCompile(`(?i)\b(?:PL)?(?:\d{3}-\d{3}-\d{2}-\d{2}|\d{3}-\d{2}-\d{2}-\d{3})\b`)},
	{Name: "taxid", Need: digits, Re: regexp.MustCompile(`(?i)\bPL\d{10}\b`)},
	{Name: "hex", Need: digits, Re: regexp.MustCompile(`(?i)\b(?:0x[0-9a-f]+|[0-9a-f]{8,})\b`), Replace: hexID},
	{Name: "id", Need: digits, Re: regexp.MustCompile(`\b[\p{L}_]+[\-_]?\d[\p{L}\p{N}_\-]*`), Replace: mixedID},
	{Name: "amount", Need: digits, Standalone: true, Re: regexp.MustCompile(`[\-−]?\d{1,3}(?:[ \x{00A0}\x{202F}]\d{3})+(?:[.,]\d+)?|[\-−]?\d+[.,]\d+`)},
	{Name: "number", Need: digits, Standalone: true, Re: regexp.MustCompile(`[\-−]?\d+`)},
}

// repeated finds placeholders that follow each other (with spaces or separators between).
var repeated = regexp.MustCompile(`…(?:[\s,;:/\-–]*…)+`)

// Normalize returns reason's template: every variable part replaced by Placeholder,
// whitespace collapsed, at most MaxTemplateRunes runes. What a rule produced (a
// placeholder, or the parts of a URL it kept) is not looked at by the rules after it.
func Normalize(reason string) string {
	s := strings.Join(strings.Fields(reason), " ")
	// The text as pieces; done pieces are a rule's output.
	pieces := []piece{{text: s}}
	var next []piece
	for i := range Rules {
		r := &Rules[i]
		next = next[:0]
		for _, p := range pieces {
			if p.done || (r.Need != "" && !strings.ContainsAny(p.text, r.Need)) {
				next = append(next, p)
				continue
			}
			next = r.apply(p.text, next)
		}
		pieces, next = next, pieces
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, p := range pieces {
		b.WriteString(p.text)
	}
	s = b.String()
	if strings.Count(s, Placeholder) > 1 {
		s = repeated.ReplaceAllLiteralString(s, Placeholder)
	}
	if utf8.RuneCountInString(s) > MaxTemplateRunes {
		s = string([]rune(s)[:MaxTemplateRunes-1]) + Placeholder
	}
	return s
}

type piece struct {
	text string
	done bool
}

// apply splits text into what r leaves (not done) and what it produced (done), appended to out.
func (r *Rule) apply(text string, out []piece) []piece {
	at := 0
	for _, m := range r.Re.FindAllStringIndex(text, -1) {
		match := text[m[0]:m[1]]
		if r.Standalone && (letterBefore(text, m[0]) || letterAfter(text, m[1])) {
			continue
		}
		rep := Placeholder
		if r.Keep {
			rep = match
		} else if r.Replace != nil {
			if rep = r.Replace(match); rep == match {
				continue
			}
		}
		if m[0] > at {
			out = append(out, piece{text: text[at:m[0]]})
		}
		out = append(out, piece{text: rep, done: true})
		at = m[1]
	}
	if at < len(text) {
		out = append(out, piece{text: text[at:]})
	}
	return out
}

func letterBefore(s string, i int) bool {
	if i == 0 {
		return false
	}
	c, _ := utf8.DecodeLastRuneInString(s[:i])
	return unicode.IsLetter(c)
}

func letterAfter(s string, i int) bool {
	if i >= len(s) {
		return false
	}
	c, _ := utf8.DecodeRuneInString(s[i:])
	return unicode.IsLetter(c)
}

// Failure is what a fingerprint is made of (the reason is normalized by Of).
type Failure struct {
	WorkflowID string
	StepID     string
	ErrorType  string
	ErrorCode  string
	Reason     string
}

// Print is a failure's fingerprint and what it was made from.
type Print struct {
	// Hash is hex SHA-256 of the fields, the template and Version.
	Hash string
	// Template is the normalized reason: a group's title.
	Template string
	Version  int
}

// Of fingerprints f under the current rules.
func Of(f Failure) Print {
	t := Normalize(f.Reason)
	return Print{Hash: hash(f.WorkflowID, f.StepID, f.ErrorType, f.ErrorCode, t, strconv.Itoa(Version)), Template: t, Version: Version}
}

func hash(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		// Length-prefixed, so that no two different lists of parts hash alike.
		h.Write([]byte(strconv.Itoa(len(p))))
		h.Write([]byte{':'})
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// url keeps a URL's scheme, host and the path segments that are words; it replaces the ones
// that are ids, and the query and fragment.
func url(m string) string {
	i := strings.Index(m, "://") + 3
	rest := m[i:]
	cut := len(rest)
	if j := strings.IndexAny(rest, "?#"); j >= 0 {
		cut = j
	}
	path, tail := rest[:cut], rest[cut:]
	// A URL at the end of a sentence keeps its full stop (colon, bracket) outside.
	trail := ""
	for path != "" && strings.ContainsRune(".,:;!)", rune(path[len(path)-1])) {
		trail = path[len(path)-1:] + trail
		path = path[:len(path)-1]
	}
	segs := strings.Split(path, "/")
	if at := strings.LastIndexByte(segs[0], '@'); at >= 0 {
		segs[0] = segs[0][at+1:] // no credentials
	}
	for k := 1; k < len(segs); k++ {
		if isIDSegment(segs[k]) {
			segs[k] = Placeholder
		}
	}
	out := m[:i] + strings.Join(segs, "/")
	if tail != "" {
		out += tail[:1] + Placeholder
	}
	return out + trail
}

// isIDSegment: a path segment that names one thing rather than a kind of thing: it has a
// digit and is not a short word with a version number (v1, api2).
func isIDSegment(s string) bool {
	nd := 0
	for _, c := range s {
		if c >= '0' && c <= '9' {
			nd++
		}
	}
	if nd == 0 {
		return false
	}
	if len(s) <= 4 && nd <= 1 {
		return false // v1, v2, api2
	}
	return true
}

// quoted replaces what is between the quotes and keeps the quotes.
func quoted(m string) string {
	open, _ := utf8.DecodeRuneInString(m)
	close, _ := utf8.DecodeLastRuneInString(m)
	return string(open) + Placeholder + string(close)
}

func hasDigit(m string) string {
	if strings.ContainsAny(m, digits) {
		return Placeholder
	}
	return m
}

// hexID replaces 0x… and runs of 8 or more hex digits that hold a digit (a run of letters
// only, such as "deadbeef" or "facade", may be a word and stays).
func hexID(m string) string {
	if strings.HasPrefix(m, "0x") || strings.HasPrefix(m, "0X") || strings.ContainsAny(m, digits) {
		return Placeholder
	}
	return m
}

// mixedID replaces a word with digits in it that is an id (ab12345, exec_01HX…, FV-123),
// and keeps short words with a version (v2, OAuth2, S3).
func mixedID(m string) string {
	nd := 0
	for _, c := range m {
		if c >= '0' && c <= '9' {
			nd++
		}
	}
	if nd >= 2 || utf8.RuneCountInString(m) >= 8 {
		return Placeholder
	}
	return m
}
