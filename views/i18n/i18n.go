// Package i18n translates the user interface into Polish and English: the message files
// (embedded), the localizer of a request (kept in its context, where templ components read
// it), and the formats of times, relative times and numbers of each language.
//
// Message ids are stable, dotted names ("nav.workflows"). A plural message has the forms of
// its language (Polish: one, few, many; English: one, other) and gets its count as .Count.
// TestMessageFiles fails when a message is in one file and not the other, or when code uses
// an id that no file has.
package i18n

import (
	"cmp"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	goi18n "github.com/nicksnyder/go-i18n/v2/i18n"
	"golang.org/x/text/language"
)

// Languages are the languages of the interface; English is the fallback.
var Languages = []string{"pl", "en"}

// Fallback is the language used when nothing else decides.
const Fallback = "en"

//go:embed locales/*.json locales/formats/*.json
var files embed.FS

var (
	bundle  = load()
	formats = loadFormats()
)

// format translates text that services write in English with values in it ("must be
// between 1000 and 300000"): the English pattern, with %s for each value, and the
// translation, with %s for the same values in the same order.
type format struct {
	match *regexp.Regexp
	to    string
}

// loadFormats reads locales/formats/<lang>.json: {"must be between %s and %s": "musi być od %s do %s"}.
// A text that two formats match takes the more specific one, the one with more fixed text
// ("http step url %s: %s" before "http step url %s %s"; "The delivery is pending; …" before
// "The delivery is %s; …"), whatever the order of the file.
func loadFormats() map[string][]format {
	out := map[string][]format{}
	names, _ := fs.Glob(files, "locales/formats/*.json")
	for _, name := range names {
		raw, err := files.ReadFile(name)
		if err != nil {
			panic(err)
		}
		var m map[string]string
		if err := json.Unmarshal(raw, &m); err != nil {
			panic(fmt.Sprintf("i18n: %s: %v", name, err))
		}
		lang := strings.TrimSuffix(path.Base(name), ".json")
		froms := slices.Collect(maps.Keys(m))
		fixed := func(from string) int { return len(strings.ReplaceAll(from, "%s", "")) }
		slices.SortFunc(froms, func(a, b string) int { return cmp.Or(fixed(b)-fixed(a), strings.Compare(a, b)) })
		for _, from := range froms {
			re := "^" + strings.ReplaceAll(regexp.QuoteMeta(from), "%s", "(.+?)") + "$"
			out[lang] = append(out[lang], format{match: regexp.MustCompile(re), to: m[from]})
		}
	}
	return out
}

// Message files are locales/<area>.<lang>.json (app, pages, …); each area has one per language.
func load() *goi18n.Bundle {
	b := goi18n.NewBundle(language.English)
	b.RegisterUnmarshalFunc("json", json.Unmarshal)
	names, _ := fs.Glob(files, "locales/*.json")
	for _, name := range names {
		if _, err := b.LoadMessageFileFS(files, name); err != nil {
			panic(fmt.Sprintf("i18n: message file %s: %v", name, err)) // embedded: a build error
		}
	}
	return b
}

// Supported reports whether lang is a language of the interface.
func Supported(lang string) bool {
	for _, l := range Languages {
		if l == lang {
			return true
		}
	}
	return false
}

var matcher = language.NewMatcher([]language.Tag{language.English, language.Polish})

// FromAcceptLanguage returns the interface language an Accept-Language header asks for, or
// "" when it names neither Polish nor English.
func FromAcceptLanguage(header string) string {
	tags, _, err := language.ParseAcceptLanguage(header)
	if err != nil || len(tags) == 0 {
		return ""
	}
	_, i, conf := matcher.Match(tags...)
	if conf == language.No {
		return ""
	}
	return []string{"en", "pl"}[i]
}

// Resolve picks the language of a page: the user's saved preference, else the
// organization's default, else the browser's Accept-Language, else English.
func Resolve(user, org, acceptLanguage string) string {
	switch {
	case Supported(user):
		return user
	case Supported(org):
		return org
	}
	if l := FromAcceptLanguage(acceptLanguage); l != "" {
		return l
	}
	return Fallback
}

// ResolveAPI picks the language of an API answer: a request's Accept-Language that names
// Polish or English wins over the saved preferences.
func ResolveAPI(user, org, acceptLanguage string) string {
	if l := FromAcceptLanguage(acceptLanguage); l != "" {
		return l
	}
	return Resolve(user, org, "")
}

// Localizer translates and formats for one language and time zone.
type Localizer struct {
	lang string
	zone *time.Location
	loc  *goi18n.Localizer
}

// New returns the localizer of lang (English if it is not supported) in zone (UTC if nil).
func New(lang string, zone *time.Location) *Localizer {
	if !Supported(lang) {
		lang = Fallback
	}
	if zone == nil {
		zone = time.UTC
	}
	return &Localizer{lang: lang, zone: zone, loc: goi18n.NewLocalizer(bundle, lang)}
}

// Lang is the localizer's language ("pl", "en"), for <html lang>.
func (l *Localizer) Lang() string { return l.lang }

// Zone is the time zone times are shown in.
func (l *Localizer) Zone() *time.Location { return l.zone }

// T returns message id, filled with data (pairs of name and value: "name", x). An unknown
// id comes back as itself, so a missing translation shows, and the message-file test fails.
func (l *Localizer) T(id string, data ...any) string {
	s, err := l.loc.Localize(&goi18n.LocalizeConfig{MessageID: id, TemplateData: pairs(data)})
	if err != nil {
		return id
	}
	return s
}

// Text translates a message that is either a message id or a service's English text (see
// format); text it has no translation for comes back as it is.
func (l *Localizer) Text(s string) string {
	if s == "" {
		return s
	}
	if t := l.T(s); t != s {
		return t
	}
	for _, f := range formats[l.lang] {
		m := f.match.FindStringSubmatch(s)
		if m == nil {
			continue
		}
		out := f.to
		for _, v := range m[1:] {
			// A value may be a service's text itself ("is too long; use …"): shorter, so
			// this ends. A decimal number is written the language's way ("0,5").
			if decimalValue.MatchString(v) {
				out = strings.Replace(out, "%s", l.decimalText(v), 1)
				continue
			}
			// A time a service wrote in UTC ("2026-11-25 12:49 UTC") reads in the reader's
			// zone and format, as the page's own times do; a group title's placeholder for
			// it ("… UTC") loses its "UTC".
			if t, ok := utcValue(v); ok {
				out = strings.Replace(out, "%s", l.Time(t), 1)
				continue
			}
			if v == "… UTC" {
				out = strings.Replace(out, "%s", "…", 1)
				continue
			}
			out = strings.Replace(out, "%s", l.Text(v), 1)
		}
		return out
	}
	return l.localTimes(s)
}

// utcTimes finds times as services write them in UTC (utcValue), and a group title's
// placeholder for one ("… UTC").
var utcTimes = regexp.MustCompile(`\d{4}-\d{2}-\d{2} \d{2}:\d{2}(?::\d{2})? UTC|… UTC`)

// localTimes writes the UTC times in s, a service's text no format translates (as English
// is), in l's zone and format, as the page's own times are; "… UTC" becomes "…".
func (l *Localizer) localTimes(s string) string {
	if !strings.Contains(s, " UTC") {
		return s
	}
	return utcTimes.ReplaceAllStringFunc(s, func(v string) string {
		if t, ok := utcValue(v); ok {
			return l.Time(t)
		}
		return "…"
	})
}

// utcValue parses v when it is a time as services write it in UTC, to the minute
// ("2026-11-25 12:49 UTC", engine/periods.go) or the second.
func utcValue(v string) (time.Time, bool) {
	for _, layout := range []string{"2006-01-02 15:04 UTC", "2006-01-02 15:04:05 UTC"} {
		if t, err := time.ParseInLocation(layout, v, time.UTC); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// decimalValue is a number with decimals as Go writes it ("0.5", "-1.25").
var decimalValue = regexp.MustCompile(`^-?[0-9]+\.[0-9]+$`)

// decimalText writes v, a decimalValue, in l's number format with the same decimals.
func (l *Localizer) decimalText(v string) string {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return v
	}
	_, frac, _ := strings.Cut(v, ".")
	return l.Number(f, len(frac))
}

// TOr returns message id, or fallback when there is no such message (for ids built from
// data, such as a status that a newer version added).
func (l *Localizer) TOr(id, fallback string, data ...any) string {
	if s := l.T(id, data...); s != id {
		return s
	}
	return fallback
}

// N returns plural message id for count n (available to the message as .Count).
func (l *Localizer) N(id string, n int, data ...any) string {
	d := pairs(data)
	if d == nil {
		d = map[string]any{}
	}
	d["Count"] = n
	s, err := l.loc.Localize(&goi18n.LocalizeConfig{MessageID: id, PluralCount: n, TemplateData: d})
	if err != nil {
		return id
	}
	return s
}

func pairs(data []any) map[string]any {
	if len(data) == 0 {
		return nil
	}
	m := make(map[string]any, len(data)/2)
	for i := 0; i+1 < len(data); i += 2 {
		if k, ok := data[i].(string); ok {
			m[k] = data[i+1]
		}
	}
	return m
}

// Time shows t in the localizer's zone: "23 lis 2026, 14:05" / "23 Nov 2026, 14:05".
func (l *Localizer) Time(t time.Time) string {
	t = t.In(l.zone)
	return l.T("time.format", "Day", t.Day(), "Month", l.T(fmt.Sprintf("month.short.%d", int(t.Month()))),
		"Year", t.Year(), "Clock", t.Format("15:04"))
}

// TimeSec is Time to the second, where seconds matter (attempts, a dead letter's history):
// "23 lis 2026, 14:05:07".
func (l *Localizer) TimeSec(t time.Time) string {
	t = t.In(l.zone)
	return l.T("time.format", "Day", t.Day(), "Month", l.T(fmt.Sprintf("month.short.%d", int(t.Month()))),
		"Year", t.Year(), "Clock", t.Format("15:04:05"))
}

// RelativeSec is Relative counted in seconds when t is under a minute and a half away ("in
// 12 seconds", "12 seconds ago"), for what happens soon (the next attempt).
func (l *Localizer) RelativeSec(t, now time.Time) string {
	d := t.Sub(now).Round(time.Second)
	switch {
	case d >= 90*time.Second || d <= -90*time.Second:
		return l.Relative(t, now)
	case d == 0:
		return l.T("time.now")
	case d > 0:
		return l.T("time.in", "Amount", l.N("time.seconds", int(d.Seconds())))
	}
	return l.T("time.ago", "Amount", l.N("time.seconds", int(-d.Seconds())))
}

// UTC shows t in UTC for a tooltip: "2026-11-23 13:05:00 UTC".
func (l *Localizer) UTC(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") }

// Relative says how far t is from now: "3 days ago", "in 5 minutes" / "3 dni temu", "za 5 minut".
func (l *Localizer) Relative(t, now time.Time) string {
	d := t.Sub(now)
	future := d > 0
	if d < 0 {
		d = -d
	}
	var amount string
	switch {
	case d < 45*time.Second:
		return l.T("time.now")
	case d < 45*time.Minute:
		amount = l.N("time.minutes", max(1, int(math.Round(d.Minutes()))))
	case d < 22*time.Hour:
		amount = l.N("time.hours", max(1, int(math.Round(d.Hours()))))
	default:
		amount = l.N("time.days", max(1, int(math.Round(d.Hours()/24))))
	}
	if future {
		return l.T("time.in", "Amount", amount)
	}
	return l.T("time.ago", "Amount", amount)
}

// Number formats f with decimals places: "1 234,56" (Polish: a no-break space groups
// thousands, a comma before decimals) / "1,234.56".
func (l *Localizer) Number(f float64, decimals int) string {
	s := strconv.FormatFloat(math.Abs(f), 'f', decimals, 64)
	whole, frac, _ := strings.Cut(s, ".")
	group, point := ",", "."
	if l.lang == "pl" {
		group, point = "\u00a0", ","
	}
	var b strings.Builder
	if f < 0 && strings.Trim(s, "0.") != "" {
		b.WriteByte('-')
	}
	for i, r := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteString(group)
		}
		b.WriteRune(r)
	}
	if frac != "" {
		b.WriteString(point + frac)
	}
	return b.String()
}

// Money formats an amount in złoty: "1 234,56 zł" / "PLN 1,234.56".
func (l *Localizer) Money(f float64) string {
	return l.T("money.pln", "Amount", l.Number(f, 2))
}

type ctxKey struct{}

var english = New(Fallback, time.UTC)

// With returns ctx carrying l.
func With(ctx context.Context, l *Localizer) context.Context {
	return context.WithValue(ctx, ctxKey{}, l)
}

// From returns the localizer in ctx, or English in UTC.
func From(ctx context.Context) *Localizer {
	if l, ok := ctx.Value(ctxKey{}).(*Localizer); ok && l != nil {
		return l
	}
	return english
}

// T translates id with the localizer in ctx (for templ components: i18n.T(ctx, "nav.workflows")).
func T(ctx context.Context, id string, data ...any) string { return From(ctx).T(id, data...) }

// N translates plural id for count n with the localizer in ctx.
func N(ctx context.Context, id string, n int, data ...any) string { return From(ctx).N(id, n, data...) }

// Catalog gives services the message files without importing this package: a text by
// language and message id (services/notify.Texts).
type Catalog struct{}

// Text returns message id in lang (English if lang is not supported), filled with data
// (pairs of name and value).
func (Catalog) Text(lang, id string, data ...any) string { return New(lang, nil).T(id, data...) }

// Supported reports whether lang has messages.
func (Catalog) Supported(lang string) bool { return Supported(lang) }

// Translate returns a service's text (an error's reason, a failure group's title) in lang,
// as pages show it (Localizer.Text).
func (Catalog) Translate(lang, s string) string { return New(lang, nil).Text(s) }

// Time writes t in lang, in zone, as pages do ("22 gru 2026, 00:00"; to the second when it
// has seconds: "23 lis 2026, 10:00:10"), with the zone's abbreviation ("CET"): a message is
// read away from the page that says which zone its times are in.
func (Catalog) Time(lang string, zone *time.Location, t time.Time) string {
	if zone == nil {
		zone = time.UTC
	}
	l, t := New(lang, zone), t.In(zone)
	if t.Second() != 0 {
		return l.TimeSec(t) + " " + t.Format("MST")
	}
	return l.Time(t) + " " + t.Format("MST")
}
