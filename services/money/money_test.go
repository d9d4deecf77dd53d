package money

import (
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in, cur string
		want    int64
	}{
		{"184230.50", "PLN", 18423050},
		{"184 230,50", "PLN", 18423050},
		{"184\u00a0230,50", "PLN", 18423050},
		{"1,234.5", "EUR", 123450},
		{"1.234,56", "PLN", 123456},
		{"1.234.567", "PLN", 123456700},
		{"12,5", "PLN", 1250},
		{"0.07", "PLN", 7},
		{",5", "PLN", 50},
		{"-12", "PLN", -1200},
		{"+3", "PLN", 300},
		{"1'000", "CHF", 100000},
		{"1500", "JPY", 1500},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in, tt.cur)
		if err != nil || got != tt.want {
			t.Errorf("Parse(%q, %s) = %d, %v; want %d", tt.in, tt.cur, got, err, tt.want)
		}
	}
	for _, in := range []string{"", "-", ".", "abc", "1e3", "12.345.6,7,8", "0.001", "1,234", "12.345", "12.5", "99999999999999999999"} {
		cur := "PLN"
		if in == "12.5" {
			cur = "JPY"
		}
		if got, err := Parse(in, cur); err == nil {
			t.Errorf("Parse(%q, %s) = %d, want an error", in, cur, got)
		}
	}
}

func TestFormat(t *testing.T) {
	tests := []struct {
		minor     int64
		cur, lang string
		want      string
	}{
		{18423050, "PLN", "pl", "184\u00a0230,50\u00a0zł"},
		{18423050, "PLN", "en", "PLN\u00a0184,230.50"},
		{7, "PLN", "pl", "0,07\u00a0zł"},
		{-123456, "EUR", "pl", "-1\u00a0234,56\u00a0EUR"},
		{100000000, "EUR", "en", "EUR\u00a01,000,000.00"},
		{1500, "JPY", "en", "JPY\u00a01,500"},
		{0, "PLN", "pl", "0,00\u00a0zł"},
	}
	for _, tt := range tests {
		if got := Format(tt.minor, tt.cur, tt.lang); got != tt.want {
			t.Errorf("Format(%d, %s, %s) = %q, want %q", tt.minor, tt.cur, tt.lang, got, tt.want)
		}
	}
	for minor, want := range map[int64]string{18423050: "184230.50", 7: "0.07", -5: "-0.05", 100: "1.00"} {
		if got := Decimal(minor, "PLN"); got != want {
			t.Errorf("Decimal(%d) = %q, want %q", minor, got, want)
		}
	}
}

// Ten thousand amounts of 0.10 sum to exactly 1,000.00: no float drift.
func TestSumIsExact(t *testing.T) {
	var sum int64
	for i := 0; i < 10000; i++ {
		n, err := Parse("0.10", "PLN")
		if err != nil {
			t.Fatal(err)
		}
		sum += n
	}
	if got := Decimal(sum, "PLN"); got != "1000.00" {
		t.Errorf("sum = %s", got)
	}
}

func TestParseCurrency(t *testing.T) {
	for in, want := range map[string]string{"": "PLN", "eur": "EUR", " PLN ": "PLN"} {
		if got, err := ParseCurrency(in); err != nil || got != want {
			t.Errorf("ParseCurrency(%q) = %q, %v", in, got, err)
		}
	}
	for _, in := range []string{"zł", "EURO", "E1R"} {
		if _, err := ParseCurrency(in); err == nil {
			t.Errorf("ParseCurrency(%q) accepted", in)
		}
	}
}
