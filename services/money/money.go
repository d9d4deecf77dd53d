// Package money reads and writes amounts exactly: an amount is a whole number of its
// currency's minor units (grosze for PLN), never a float, so sums over any number of items
// are exact in Go and in the database alike.
package money

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// DefaultCurrency is the currency of an amount that names none.
const DefaultCurrency = "PLN"

// Amount is an amount of money in minor units of Currency.
type Amount struct {
	Minor    int64
	Currency string
}

// zeroDecimals are the ISO 4217 currencies without minor units that an office may meet.
var zeroDecimals = map[string]bool{"JPY": true, "KRW": true, "ISK": true}

// Decimals returns how many digits currency c has after the decimal point.
func Decimals(c string) int {
	if zeroDecimals[c] {
		return 0
	}
	return 2
}

// grouped reports whether s is digits grouped by three with sep: 1-3 digits not starting
// with 0, then groups of exactly 3.
func grouped(s string, sep byte) bool {
	parts := strings.Split(s, string(sep))
	if len(parts[0]) < 1 || len(parts[0]) > 3 || parts[0][0] == '0' {
		return false
	}
	for _, p := range parts[1:] {
		if len(p) != 3 {
			return false
		}
	}
	return true
}

// ParseCurrency checks a three-letter ISO 4217 code ("" is DefaultCurrency) and returns it in
// capitals.
func ParseCurrency(s string) (string, error) {
	s = strings.ToUpper(strings.TrimSpace(s))
	if s == "" {
		return DefaultCurrency, nil
	}
	if len(s) != 3 || strings.IndexFunc(s, func(r rune) bool { return r < 'A' || r > 'Z' }) >= 0 {
		return "", fmt.Errorf("%q is not a currency code: write three letters such as PLN or EUR", s)
	}
	return s, nil
}

// Parse reads a decimal amount of currency c: "184230.50", "184 230,50", "1,234.5", "-12",
// with a space, a no-break space, an apostrophe or the other separator grouping thousands.
// More digits after the point than the currency has, a float's exponent, or anything else that
// is not a decimal is an error that says so.
func Parse(s, c string) (int64, error) {
	orig := s
	s = strings.TrimSpace(s)
	s = strings.NewReplacer(" ", "", "\u00a0", "", "\u202f", "", "'", "").Replace(s)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(strings.TrimPrefix(s, "-"), "+")
	if s == "" {
		return 0, fmt.Errorf("%q is not an amount", orig)
	}
	// Both '.' and ',': the last is the decimal point, the other groups thousands. One of
	// them more than once groups thousands ("1.234.567"). Once, it is the decimal point,
	// except before exactly three digits, where "1,234" and "12.345" could be either: that
	// is refused rather than guessed (a JSON number 12.345 must not become 12 345,00).
	intPart, frac := s, ""
	if point := strings.LastIndexAny(s, ".,"); point >= 0 {
		sep := s[point]
		both := strings.Contains(s, ".") && strings.Contains(s, ",")
		switch {
		case !both && strings.Count(s, string(sep)) > 1:
			if !grouped(s, sep) {
				return 0, fmt.Errorf("%q is not an amount: group thousands by three digits", orig)
			}
		case !both && len(s)-point-1 == 3:
			return 0, fmt.Errorf("%q is ambiguous: write it without the separator, or with the decimal places (%s%c00)", orig, s[:point]+s[point+1:], sep)
		default:
			intPart, frac = s[:point], s[point+1:]
		}
	}
	if i := strings.IndexAny(intPart, ".,"); i >= 0 {
		if !grouped(intPart, intPart[i]) {
			return 0, fmt.Errorf("%q is not an amount: group thousands by three digits", orig)
		}
		intPart = strings.ReplaceAll(intPart, string(intPart[i]), "")
	}
	if intPart == "" && frac == "" {
		return 0, fmt.Errorf("%q is not an amount", orig)
	}
	for _, part := range []string{intPart, frac} {
		if strings.IndexFunc(part, func(r rune) bool { return r < '0' || r > '9' }) >= 0 {
			return 0, fmt.Errorf("%q is not an amount: use digits, a decimal point or comma, and spaces between thousands", orig)
		}
	}
	dec := Decimals(c)
	if len(frac) > dec {
		return 0, fmt.Errorf("%q has more than %d decimal places for %s", orig, dec, c)
	}
	frac += strings.Repeat("0", dec-len(frac))
	n, err := strconv.ParseInt(intPart+frac, 10, 64)
	if err != nil || n > math.MaxInt64/1000 {
		return 0, fmt.Errorf("%q is too large an amount", orig)
	}
	if neg {
		n = -n
	}
	return n, nil
}

// Format writes minor units of currency c for the language lang ("pl": "184 230,50 zł",
// anything else: "PLN 184,230.50"), with a no-break space grouping thousands in Polish.
func Format(minor int64, c, lang string) string {
	dec := Decimals(c)
	neg := minor < 0
	if neg {
		minor = -minor
	}
	digits := strconv.FormatInt(minor, 10)
	if len(digits) <= dec {
		digits = strings.Repeat("0", dec-len(digits)+1) + digits
	}
	whole, frac := digits[:len(digits)-dec], digits[len(digits)-dec:]
	group, point := ",", "."
	if lang == "pl" {
		group, point = "\u00a0", ","
	}
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	if lang != "pl" {
		b.WriteString(c + "\u00a0")
	}
	for i, r := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteString(group)
		}
		b.WriteRune(r)
	}
	if dec > 0 {
		b.WriteString(point + frac)
	}
	if lang == "pl" {
		sym := c
		if c == "PLN" {
			sym = "zł"
		}
		b.WriteString("\u00a0" + sym)
	}
	return b.String()
}

// Decimal writes minor units of currency c as a plain decimal ("184230.50"), as the API
// carries amounts (a string, so no client reads it into a float by accident).
func Decimal(minor int64, c string) string {
	return DecimalText(strconv.FormatInt(minor, 10), c)
}

// DecimalText is Decimal for a whole number of minor units written in decimal digits, of any
// length (a sum as the database returned it): exact, never through a float.
func DecimalText(minor, c string) string {
	dec := Decimals(c)
	neg := strings.HasPrefix(minor, "-")
	digits := strings.TrimLeft(strings.TrimPrefix(minor, "-"), "0")
	if dec == 0 {
		if digits == "" {
			return "0"
		}
		if neg {
			return "-" + digits
		}
		return digits
	}
	if len(digits) <= dec {
		digits = strings.Repeat("0", dec-len(digits)+1) + digits
	}
	out := digits[:len(digits)-dec] + "." + digits[len(digits)-dec:]
	if neg && strings.Trim(digits, "0") != "" {
		out = "-" + out
	}
	return out
}
