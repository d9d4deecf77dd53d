// Package checkdigit checks the check digits of Polish identifiers written as digits only
// (no dashes, spaces or country code): NIP, REGON (9 or 14 digits), PESEL, and a Polish
// account number (NRB: an IBAN without its "PL"). A string of another length, or with
// anything but digits, is not valid.
package checkdigit

// NIP reports whether d is a tax number: 10 digits, the last the weighted sum of the others
// mod 11 (a sum giving 10 has no valid NIP).
func NIP(d string) bool {
	c, ok := weighted(d, 10, []int{6, 5, 7, 2, 3, 4, 5, 6, 7}, 11)
	return ok && c != 10 && c == int(d[9]-'0')
}

// REGON reports whether d is a 9- or 14-digit statistical number (its check digit mod 11,
// 10 counting as 0).
func REGON(d string) bool {
	ws := []int{8, 9, 2, 3, 4, 5, 6, 7}
	if len(d) == 14 {
		ws = []int{2, 4, 8, 5, 0, 9, 7, 3, 6, 1, 2, 4, 8}
	}
	c, ok := weighted(d, len(ws)+1, ws, 11)
	return ok && c%10 == int(d[len(ws)]-'0')
}

// PESEL reports whether d is a personal number: 11 digits, the last 10 minus the weighted
// sum of the others mod 10.
func PESEL(d string) bool {
	c, ok := weighted(d, 11, []int{1, 3, 7, 9, 1, 3, 7, 9, 1, 3}, 10)
	return ok && (10-c)%10 == int(d[10]-'0')
}

// NRB reports whether d is a Polish account number: 26 digits whose IBAN (PL, its check
// digits and the rest moved behind the country, P = 25, L = 21) is 1 mod 97 (ISO 13616).
func NRB(d string) bool {
	if len(d) != 26 || !digits(d) {
		return false
	}
	n := 0
	for _, r := range d[2:] + "2521" + d[:2] {
		n = (n*10 + int(r-'0')) % 97
	}
	return n == 1
}

// weighted is the sum of d's first digits times ws, mod m, when d has n digits.
func weighted(d string, n int, ws []int, m int) (int, bool) {
	if len(d) != n || !digits(d) {
		return 0, false
	}
	sum := 0
	for i, w := range ws {
		sum += w * int(d[i]-'0')
	}
	return sum % m, true
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
