// Package poison finds poison inputs (issue 22, seed 004): an input value, such as a
// document number, an invoice number or a NIP, that breaks runs of different workflows, or
// of one workflow three times. An item's values are the identifiers in its input (Values);
// Check counts, for each, the organization's dead letters that hold it and how often they
// failed, of the failures a value can cause (InputCaused): a client's NIP is in every run
// for that client, and the bank's maintenance or an expired token failing three of them
// says nothing about the NIP. Nor does a failure whose reason names another of its values
// (an invoice the tax office has not got yet): a reason that names some of them counts for
// those alone, and one that names only identifiers its input does not hold (an invoice of
// the statement the step read) for none (countsFor). An item's page and its group's flag
// only the values their own failures count for. Nothing runs on the failure path: the dead
// letters' search text (written with them) finds the candidates, and their inputs are
// checked exactly.
package poison

import (
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/checkdigit"
	"lifeline/services/classify"
)

// Thresholds: a value is poison when it failed in at least Workflows workflows, or at least
// Failures times.
const (
	Workflows = 2
	Failures  = 3
)

// maxValues bounds the values an item is checked for; maxCandidates the dead letters read
// for one value.
const (
	maxValues     = 5
	maxCandidates = 500
)

// Value is an identifier found in an input: its kind (nip, regon, pesel, iban, ksef,
// invoice) and its text as keyed (digits only for the numeric ones; upper case otherwise).
type Value struct {
	Kind string `json:"kind"`
	Key  string `json:"value"`
	// raw is the value as the input wrote it: what a dead letter's search text holds.
	raw string
}

// kinds are the identifiers, each a whole input value (not a part of free text). The
// numeric ones are keyed by their digits.
var kinds = []struct {
	name    string
	re      *regexp.Regexp
	numeric bool
}{
	{"ksef", regexp.MustCompile(`(?i)^\d{10}-\d{8}-[0-9a-f]{6,16}-[0-9a-f]{2}$`), false},
	{"iban", regexp.MustCompile(`(?i)^(?:PL)?\d{2}(?:[ \x{00A0}]?\d{4}){6}$`), true},
	{"nip", regexp.MustCompile(`(?i)^(?:PL)?(?:\d{10}|\d{3}-\d{3}-\d{2}-\d{2}|\d{3}-\d{2}-\d{2}-\d{3})$`), true},
	{"pesel", regexp.MustCompile(`^\d{11}$`), true},
	{"regon", regexp.MustCompile(`^(?:\d{9}|\d{14})$`), true},
	{"invoice", regexp.MustCompile(`^[\p{L}]{1,6}[/\-]?\d+(?:/[0-9\p{L}]+)+$`), false},
}

// Values returns the identifiers in a JSON input, in the order found, each once (at most
// maxValues). Keys named like secrets are not read (the input is redacted anyway).
func Values(input []byte) []Value {
	var v any
	if json.Unmarshal(input, &v) != nil {
		return nil
	}
	var out []Value
	var walk func(v any)
	walk = func(v any) {
		if len(out) >= maxValues {
			return
		}
		switch x := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				walk(x[k])
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		case string:
			if id, ok := identify(x); ok && !holds(out, id) {
				out = append(out, id)
			}
		case float64:
			if x == float64(int64(x)) {
				if id, ok := identify(strconv.FormatInt(int64(x), 10)); ok && !holds(out, id) {
					out = append(out, id)
				}
			}
		}
	}
	walk(v)
	return out
}

// Identify returns the identifier s is (its kind and key), as Values finds it in an input;
// false when s is none of them.
func Identify(s string) (Value, bool) { return identify(s) }

func identify(s string) (Value, bool) {
	s = strings.TrimSpace(s)
	if len(s) < 8 || len(s) > 64 {
		return Value{}, false
	}
	for _, k := range kinds {
		if !k.re.MatchString(s) {
			continue
		}
		if k.numeric {
			return Value{Kind: k.name, raw: s, Key: strings.Map(func(r rune) rune {
				if r >= '0' && r <= '9' {
					return r
				}
				return -1
			}, s)}, true
		}
		return Value{Kind: k.name, Key: strings.ToUpper(s), raw: s}, true
	}
	return Value{}, false
}

// Flag is what Check found of one value: the dead letters holding it (Items), how many
// times they failed (Failures: each item once, and once more for every manual retry of an
// item still waiting, which failed again), in how many workflows, and whether that makes it
// poison.
type Flag struct {
	Value
	Items     int  `json:"items"`
	Failures  int  `json:"failures"`
	Workflows int  `json:"workflows"`
	Poison    bool `json:"poison"`
	// Here reports whether the failures it was asked about (an item's, a group's) count for
	// the value (countsFor): a page shows a poison value where it is the cause, not beside an
	// expired token's failure of the same client.
	Here bool `json:"here"`
}

// Service checks items' values.
type Service struct {
	DB *models.DB
}

// Item returns the flags of a dead letter of the organization's input values (Check), each
// marked Here when the item's own failure counts for it (countsFor): an item the expired
// token failed is the cause of none, even when its client's NIP fails elsewhere. Errors:
// ENOTFOUND.
func (s *Service) Item(ctx context.Context, orgID, id string) ([]Flag, error) {
	c, err := s.DB.DeadLetterFailure(ctx, orgID, id)
	if err != nil {
		if models.IsNotFound(err) {
			return nil, apperr.NotFound("dead letter")
		}
		return nil, err
	}
	values := Values(c.OriginalInput)
	return s.checkHere(ctx, orgID, values, countsFor(c, values))
}

// checkHere is check of values, each marked Here when here holds it.
func (s *Service) checkHere(ctx context.Context, orgID string, values, here []Value) ([]Flag, error) {
	flags, err := s.check(ctx, orgID, values)
	for i := range flags {
		flags[i].Here = holds(here, flags[i].Value)
	}
	return flags, err
}

// groupSample is how many of a group's newest items Group reads the values of.
const groupSample = 20

// Group returns the flags of the values in the inputs of the organization's failure group's
// newest items (groupSample of them; at most maxValues values), checked as Check does, each
// marked Here when an item's failure counts for it. A group of another organization, or
// none, has no items: no flags.
func (s *Service) Group(ctx context.Context, orgID, groupID string) ([]Flag, error) {
	items, err := s.DB.GroupFailures(ctx, orgID, groupID, groupSample)
	if err != nil {
		return nil, err
	}
	var vs, here []Value
	for _, c := range items {
		values := Values(c.OriginalInput)
		counted := countsFor(c, values)
		for _, v := range values {
			if len(vs) < maxValues && !holds(vs, v) {
				vs = append(vs, v)
			}
			if holds(counted, v) && !holds(here, v) {
				here = append(here, v)
			}
		}
	}
	return s.checkHere(ctx, orgID, vs, here)
}

// Check returns a flag for each identifier in input, counted over the organization's dead
// letters (at most maxCandidates of them a value). Errors are the database's.
func (s *Service) Check(ctx context.Context, orgID string, input []byte) ([]Flag, error) {
	return s.check(ctx, orgID, Values(input))
}

func (s *Service) check(ctx context.Context, orgID string, values []Value) ([]Flag, error) {
	var out []Flag
	for _, v := range values {
		cands, err := s.DB.DeadLettersHolding(ctx, orgID, searchForm(v), maxCandidates)
		if err != nil {
			return nil, err
		}
		f := Flag{Value: v}
		wfs := map[string]bool{}
		for _, c := range cands {
			if held := Values(c.OriginalInput); !holds(held, v) || !holds(countsFor(c, held), v) {
				// The text held it inside something else, or this failure says nothing of it.
				continue
			}
			f.Items++
			f.Failures++
			if c.Status == models.DLQPending {
				f.Failures += c.ManualRetryCount
			}
			wfs[c.WorkflowID] = true
		}
		f.Workflows = len(wfs)
		f.Poison = f.Workflows >= Workflows || f.Failures >= Failures
		out = append(out, f)
	}
	return out, nil
}

// InputCaused reports whether a failure of errorType can come from the data the step was
// given (validation, permanent, internal, unknown), rather than from the service being
// down, slow, over its limit or refusing the office's credentials.
func InputCaused(errorType string) bool {
	switch classify.Type(errorType) {
	case classify.Transient, classify.Timeout, classify.RateLimit, classify.ExternalService, classify.Authorization:
		return false
	}
	return true
}

// countsFor returns the values of held (the item's input's) that its failure counts for:
//   - none when the service failed (not InputCaused) or the office's closed period held the
//     step back (no service saw the values);
//   - those its reason names, when it names some: the client's NIP beside an invoice the
//     service has not got yet is not about the NIP;
//   - only the input's documents (invoices, KSeF numbers) when its reason names only
//     identifiers the input does not hold: an invoice read from the bank's statement that
//     the tax office has not got is about that invoice, not about the client's NIP in the
//     input; a contractor's NIP no longer active is about the invoice that names it;
//   - else all of them.
func countsFor(c models.ValueCandidate, held []Value) []Value {
	if !InputCaused(c.ErrorType) || c.ErrorCode == classify.CodePeriodClosed {
		return nil
	}
	if named := namedIn(c.Reason, held); len(named) > 0 {
		return named
	}
	if namesOther(c.Reason, held) {
		return documents(held)
	}
	return held
}

// documents are the values of vs that are documents (an invoice, a KSeF number), not a
// party's identifiers: a failure about another party's NIP ("the contractor is not an
// active VAT payer") is still the invoice's.
func documents(vs []Value) []Value {
	var out []Value
	for _, v := range vs {
		if v.Kind == "invoice" || v.Kind == "ksef" {
			out = append(out, v)
		}
	}
	return out
}

// namesOther reports whether reason names an identifier (a whole word of it that Identify
// knows, a number only with its check digit right: a 10-digit reference is no NIP) that vs
// does not hold.
func namesOther(reason string, vs []Value) bool {
	for _, w := range strings.FieldsFunc(reason, func(r rune) bool {
		return unicode.IsSpace(r) || strings.ContainsRune("„”“\"'`()[]{}<>«»", r)
	}) {
		// Punctuation ends a word, not a number's decimals ("1234567890,00 zł" is no NIP).
		if id, ok := identify(strings.TrimRight(w, ",;.:…!?")); ok && checksumOK(id) && !holds(vs, id) {
			return true
		}
	}
	return false
}

// checksumOK reports whether a numeric identifier's check digit is right (NIP, REGON,
// PESEL, an account number); documents have none to check.
func checksumOK(v Value) bool {
	switch v.Kind {
	case "nip":
		return checkdigit.NIP(v.Key)
	case "regon":
		return checkdigit.REGON(v.Key)
	case "pesel":
		return checkdigit.PESEL(v.Key)
	case "iban":
		return checkdigit.NRB(v.Key)
	}
	return true
}

// namedIn returns the values of vs that reason names, whole (not inside a longer number or
// word): as the input wrote it, or by its key (a NIP keyed 5260250274 is named by "NIP
// 5260250274" whatever dashes the input had).
func namedIn(reason string, vs []Value) []Value {
	var out []Value
	upper := strings.ToUpper(reason)
	for _, w := range vs {
		if (w.raw != "" && hasWhole(reason, w.raw)) || hasWhole(upper, w.Key) {
			out = append(out, w)
		}
	}
	return out
}

// hasWhole reports whether s holds part with no letter or digit right before or after it.
func hasWhole(s, part string) bool {
	for at := 0; part != ""; {
		i := strings.Index(s[at:], part)
		if i < 0 {
			return false
		}
		i += at
		before, _ := utf8.DecodeLastRuneInString(s[:i])
		after, _ := utf8.DecodeRuneInString(s[i+len(part):])
		if !isAlnum(before) && !isAlnum(after) {
			return true
		}
		at = i + 1
	}
	return false
}

func isAlnum(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// Text is the value as its input wrote it (what the DLQ's search finds), or its key.
func (v Value) Text() string {
	if v.raw != "" {
		return v.raw
	}
	return v.Key
}

// holds reports whether vs has v (by kind and key, however it was written).
func holds(vs []Value, v Value) bool {
	return slices.ContainsFunc(vs, func(w Value) bool { return w.Kind == v.Kind && w.Key == v.Key })
}

// searchForm is the text the search text of a dead letter holding v holds: the value as
// this input wrote it (the same value written otherwise elsewhere, "526-025-02-74" for
// "5260250274", is not found: a limit of using the search text).
func searchForm(v Value) string {
	return v.raw
}
