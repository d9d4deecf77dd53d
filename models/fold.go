package models

import (
	"strings"
	"unicode"

	"golang.org/x/text/runes"
	"golang.org/x/text/transform"
	"golang.org/x/text/unicode/norm"
	"gorm.io/gorm"
)

// Fold is text as search compares it: lower case, without diacritics ("Kamińska" and
// "KAMINSKA" both fold to "kaminska", "Łódź" to "lodz"), spaces collapsed. It is what the
// search_text columns hold and what a search query is turned into, so a search ignores case
// and Polish letters the same way on every database and in any database locale (a trigram
// index then sees plain letters).
func Fold(s string) string {
	s = strings.Map(func(r rune) rune {
		switch r {
		case 'ł', 'Ł': // no decomposition: ł is a letter of its own in Unicode
			return 'l'
		case 'đ', 'Đ':
			return 'd'
		case 'ø', 'Ø':
			return 'o'
		}
		return unicode.ToLower(r)
	}, s)
	// A transformer chain keeps state: one per call.
	out, _, err := transform.String(transform.Chain(norm.NFD, runes.Remove(runes.In(unicode.Mn)), norm.NFC), s)
	if err != nil {
		out = s
	}
	return strings.Join(strings.Fields(out), " ")
}

// MaxSearchText bounds a row's search_text (characters kept of the parts, in order).
const MaxSearchText = 4000

// SearchText is the search_text of a row: its parts folded, one per line (so a search does not
// match across two of them), at most MaxSearchText characters.
func SearchText(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		if p = Fold(p); p == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p)
	}
	s := b.String()
	if r := []rune(s); len(r) > MaxSearchText {
		s = string(r[:MaxSearchText])
	}
	return s
}

// JoinSearchText joins search texts already made by SearchText (one per line), at most
// MaxSearchText characters.
func JoinSearchText(texts ...string) string {
	var kept []string
	for _, t := range texts {
		if t != "" {
			kept = append(kept, t)
		}
	}
	s := strings.Join(kept, "\n")
	if r := []rune(s); len(r) > MaxSearchText {
		s = string(r[:MaxSearchText])
	}
	return s
}

// BeforeCreate fills an execution's search text from its subject when the writer left it
// empty (the engine writes it with the input's values; rows made elsewhere, as by tests and
// tools, are still found by their subject).
func (e *Execution) BeforeCreate(*gorm.DB) error {
	if e.SearchText == "" && e.Subject != nil {
		e.SearchText = SearchText(*e.Subject)
	}
	return nil
}

// BeforeCreate fills a dead letter's search text from its subject and reason when the writer
// left it empty.
func (d *DeadLetter) BeforeCreate(*gorm.DB) error {
	if d.SearchText == "" {
		subject := ""
		if d.Subject != nil {
			subject = *d.Subject
		}
		d.SearchText = SearchText(subject, d.Reason)
	}
	return nil
}
