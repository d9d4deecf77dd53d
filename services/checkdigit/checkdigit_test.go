package checkdigit_test

import (
	"testing"

	"lifeline/services/checkdigit"
)

func TestCheckDigits(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		f    func(string) bool
		in   string
		want bool
	}{
		{"NIP", checkdigit.NIP, "5260250274", true},
		{"NIP", checkdigit.NIP, "5260250275", false},
		{"NIP", checkdigit.NIP, "7010002137", false},
		{"NIP", checkdigit.NIP, "526025027", false},
		{"NIP", checkdigit.NIP, "526-025-02-74", false},
		{"REGON", checkdigit.REGON, "123456785", true},
		{"REGON", checkdigit.REGON, "123456789", false},
		{"REGON", checkdigit.REGON, "20261123101010", true},
		{"REGON", checkdigit.REGON, "20261123101011", false},
		{"PESEL", checkdigit.PESEL, "44051401359", true},
		{"PESEL", checkdigit.PESEL, "44051401358", false},
		{"NRB", checkdigit.NRB, "61109010140000071219812874", true},
		{"NRB", checkdigit.NRB, "61109010140000071219812875", false},
		{"NRB", checkdigit.NRB, "6110901014000007121981287", false},
	} {
		if got := c.f(c.in); got != c.want {
			t.Errorf("%s(%s) = %v, want %v", c.name, c.in, got, c.want)
		}
	}
}
