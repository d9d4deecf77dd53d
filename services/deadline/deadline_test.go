package deadline

import (
	"testing"
	"time"
)

func TestEaster(t *testing.T) {
	for y, want := range map[int]time.Time{
		2000: Date(2000, time.April, 23), 2024: Date(2024, time.March, 31), 2025: Date(2025, time.April, 20),
		2026: Date(2026, time.April, 5), 2027: Date(2027, time.March, 28), 2028: Date(2028, time.April, 16),
		2029: Date(2029, time.April, 1), 2030: Date(2030, time.April, 21), 2038: Date(2038, time.April, 25),
		2285: Date(2285, time.March, 22),
	} {
		if got := Easter(y); !got.Equal(want) {
			t.Errorf("Easter(%d) = %s, want %s", y, got.Format(time.DateOnly), want.Format(time.DateOnly))
		}
	}
}

func TestHolidays(t *testing.T) {
	tests := []struct {
		day  time.Time
		want bool
	}{
		{Date(2026, time.January, 6), true},
		{Date(2010, time.January, 6), false}, // Epiphany became a day off in 2011
		{Date(2026, time.April, 6), true},    // Easter Monday
		{Date(2026, time.June, 4), true},     // Corpus Christi
		{Date(2030, time.June, 20), true},    // Corpus Christi
		{Date(2026, time.May, 24), true},     // Pentecost
		{Date(2026, time.December, 24), true},
		{Date(2024, time.December, 24), false}, // Christmas Eve is a day off from 2025
		{Date(2026, time.November, 11), true},
		{Date(2026, time.November, 12), false},
		{Date(2026, time.August, 15), true},
	}
	for _, tt := range tests {
		if got := IsHoliday(tt.day); got != tt.want {
			t.Errorf("IsHoliday(%s) = %v", tt.day.Format(time.DateOnly), got)
		}
	}
	if n := len(Holidays(2024)); n != 13 {
		t.Errorf("2024 has %d holidays, want 13", n)
	}
	for y := 2025; y <= 2030; y++ {
		if n := len(Holidays(y)); n != 14 {
			t.Errorf("%d has %d holidays, want 14", y, n)
		}
	}
}

func TestDue(t *testing.T) {
	d := Date
	tests := []struct {
		name   string
		o      Obligation
		period string
		zus    int
		want   time.Time
	}{
		{"on a Wednesday", Obligation{Name: JPKV7M}, "2026-10", 0, d(2026, 11, 25)},
		{"25th on a Saturday", Obligation{Name: JPKV7M}, "2025-09", 0, d(2025, 10, 27)},
		{"25th on a Saturday in spring", Obligation{Name: JPKV7M}, "2026-03", 0, d(2026, 4, 27)},
		{"25th on a Sunday", Obligation{Name: JPKV7M}, "2025-04", 0, d(2025, 5, 26)},
		{"Christmas, then a weekend", Obligation{Name: JPKV7M}, "2025-11", 0, d(2025, 12, 29)},
		{"December's return in January", Obligation{Name: JPKV7M}, "2026-12", 0, d(2027, 1, 25)},
		{"quarterly declaration on a Sunday", Obligation{Name: JPKV7K}, "2026-Q3", 0, d(2026, 10, 26)},
		{"quarterly declaration into the next year", Obligation{Name: JPKV7K}, "2026-Q4", 0, d(2027, 1, 25)},
		{"quarterly rule's monthly records", Obligation{Name: JPKV7K}, "2026-07", 0, d(2026, 8, 25)},
		{"ZUS on the 15th, a Sunday", Obligation{Name: ZUS}, "2026-10", 15, d(2026, 11, 16)},
		{"ZUS on the 20th", Obligation{Name: ZUS}, "2026-10", 20, d(2026, 11, 20)},
		{"ZUS defaults to the 20th", Obligation{Name: ZUS}, "2026-10", 0, d(2026, 11, 20)},
		{"Saturday, Easter Sunday and Monday", Obligation{Name: PITAdvance}, "2030-03", 0, d(2030, 4, 23)},
		{"CIT for a quarter", Obligation{Name: CITAdvance}, "2027-Q1", 0, d(2027, 4, 20)},
		{"PIT-4R on a Saturday", Obligation{Name: PIT4R}, "2025", 0, d(2026, 2, 2)},
		{"PIT-4R on a Sunday", Obligation{Name: PIT4R}, "2026", 0, d(2027, 2, 1)},
		{"PIT-4R from a month of the year", Obligation{Name: PIT4R}, "2027-05", 0, d(2028, 1, 31)},
		{"custom: 31st of February", Obligation{Name: Custom, DayOfMonth: 31, MonthsAfterPeriod: 1}, "2026-01", 0, d(2026, 3, 2)},
		{"custom: Corpus Christi", Obligation{Name: Custom, DayOfMonth: 4, MonthsAfterPeriod: 1}, "2026-05", 0, d(2026, 6, 5)},
		{"custom: Christmas Eve from 2025", Obligation{Name: Custom, DayOfMonth: 24, MonthsAfterPeriod: 1}, "2026-11", 0, d(2026, 12, 28)},
		{"custom: Christmas Eve in 2024 is a working day", Obligation{Name: Custom, DayOfMonth: 24, MonthsAfterPeriod: 1}, "2024-11", 0, d(2024, 12, 24)},
		{"custom: Independence Day", Obligation{Name: Custom, DayOfMonth: 11, MonthsAfterPeriod: 1}, "2026-10", 0, d(2026, 11, 12)},
		{"custom: Epiphany", Obligation{Name: Custom, DayOfMonth: 6, MonthsAfterPeriod: 1}, "2026-12", 0, d(2027, 1, 7)},
		{"custom: 1 May on a Saturday, 3 May on Monday", Obligation{Name: Custom, DayOfMonth: 1, MonthsAfterPeriod: 1}, "2027-04", 0, d(2027, 5, 4)},
		{"custom: Assumption on a Sunday", Obligation{Name: Custom, DayOfMonth: 15, MonthsAfterPeriod: 1}, "2027-07", 0, d(2027, 8, 16)},
		{"custom: same month", Obligation{Name: Custom, DayOfMonth: 30, MonthsAfterPeriod: 0}, "2028-06", 0, d(2028, 6, 30)},
		{"custom: after a quarter", Obligation{Name: Custom, DayOfMonth: 10, MonthsAfterPeriod: 2}, "2029-Q4", 0, d(2030, 2, 11)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParsePeriod(tt.period)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Due(tt.o, p, Settings{ZUSDay: tt.zus})
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equal(tt.want) {
				t.Errorf("Due(%s, %s) = %s %s, want %s %s", tt.o.Name, tt.period, got.Weekday(), got.Format(time.DateOnly), tt.want.Weekday(), tt.want.Format(time.DateOnly))
			}
			if !IsWorkingDay(got) {
				t.Errorf("%s is not a working day", got.Format(time.DateOnly))
			}
		})
	}
}

// Every built-in monthly due date of 2025-2030 lands on a working day no earlier than its
// nominal day and with no working day between the two.
func TestDueIsTheFirstWorkingDayFromItsNominalDay(t *testing.T) {
	for y := 2025; y <= 2030; y++ {
		for m := 1; m <= 12; m++ {
			p := Period{Year: y, Month: m}
			got, err := Due(Obligation{Name: JPKV7M}, p, Settings{})
			if err != nil {
				t.Fatal(err)
			}
			nominal := Date(y, time.Month(m), 25).AddDate(0, 1, 0)
			if got.Before(nominal) || !IsWorkingDay(got) {
				t.Fatalf("%s: %s", p, got.Format(time.DateOnly))
			}
			for d := nominal; d.Before(got); d = d.AddDate(0, 0, 1) {
				if IsWorkingDay(d) {
					t.Fatalf("%s: due %s, but %s was a working day", p, got.Format(time.DateOnly), d.Format(time.DateOnly))
				}
			}
		}
	}
}

func TestDueRefusesWhatDoesNotFit(t *testing.T) {
	tests := []struct {
		o      Obligation
		period string
	}{
		{Obligation{Name: JPKV7M}, "2026-Q3"},
		{Obligation{Name: ZUS}, "2026"},
		{Obligation{Name: JPKV7K}, "2026"},
		{Obligation{Name: PITAdvance}, "2026"},
		{Obligation{Name: Custom, DayOfMonth: 0}, "2026-10"},
		{Obligation{Name: Custom, DayOfMonth: 10, MonthsAfterPeriod: 25}, "2026-10"},
		{Obligation{Name: "VAT-7"}, "2026-10"},
	}
	for _, tt := range tests {
		p, err := ParsePeriod(tt.period)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := Due(tt.o, p, Settings{}); err == nil {
			t.Errorf("Due(%+v, %s) = %s, want an error", tt.o, tt.period, got.Format(time.DateOnly))
		}
	}
}

func TestParsePeriod(t *testing.T) {
	for s, want := range map[string]Period{
		"2026-10": {Year: 2026, Month: 10}, "2026-Q3": {Year: 2026, Quarter: 3}, "2026-q1": {Year: 2026, Quarter: 1}, "2026": {Year: 2026},
	} {
		got, err := ParsePeriod(s)
		if err != nil || got != want {
			t.Errorf("ParsePeriod(%q) = %+v, %v", s, got, err)
		}
	}
	for _, s := range []string{"", "2026-13", "2026-00", "2026-Q5", "10/2026", "2026-1", "2026-10-01"} {
		if _, err := ParsePeriod(s); err == nil {
			t.Errorf("ParsePeriod(%q) accepted", s)
		}
	}
	if got := (Period{Year: 2026, Quarter: 3}).String(); got != "2026-Q3" {
		t.Errorf("String = %q", got)
	}
	p, _ := ParsePeriod("2026-Q2")
	if !p.Contains(Date(2026, 5, 31)) || p.Contains(Date(2026, 7, 1)) {
		t.Error("Contains")
	}
}

func TestWorkingDaysLeft(t *testing.T) {
	d := Date
	tests := []struct {
		today, due time.Time
		want       int
	}{
		{d(2026, 11, 25), d(2026, 11, 25), 0},
		{d(2026, 11, 25), d(2026, 11, 26), 1},
		{d(2026, 11, 25), d(2026, 11, 30), 3},  // over a weekend
		{d(2026, 12, 22), d(2026, 12, 28), 2},  // 24, 25, 26 December off
		{d(2026, 11, 28), d(2026, 11, 30), 1},  // from a Saturday
		{d(2026, 11, 27), d(2026, 11, 25), -2}, // overdue by two working days
		{d(2026, 11, 30), d(2026, 11, 27), -1}, // overdue over a weekend
		{d(2027, 1, 1), d(2027, 1, 7), 3},      // 1 January and 6 January off: 4, 5, 7
	}
	for _, tt := range tests {
		if got := WorkingDaysLeft(tt.today, tt.due); got != tt.want {
			t.Errorf("WorkingDaysLeft(%s, %s) = %d, want %d", tt.today.Format(time.DateOnly), tt.due.Format(time.DateOnly), got, tt.want)
		}
	}
	if got := AddWorkingDays(d(2026, 12, 23), 2); !got.Equal(d(2026, 12, 29)) {
		t.Errorf("AddWorkingDays = %s", got.Format(time.DateOnly))
	}
}

func TestUrgencyOf(t *testing.T) {
	today := Date(2026, 11, 25)
	at := func(y, m, d int) *time.Time { t := Date(y, time.Month(m), d); return &t }
	tests := []struct {
		due  *time.Time
		want Urgency
	}{
		{at(2026, 11, 24), Overdue},
		{at(2026, 11, 25), DueToday},
		{at(2026, 11, 26), AtRisk},
		{at(2026, 11, 30), AtRisk}, // the third working day
		{at(2026, 12, 1), Later},
		{nil, None},
	}
	for _, tt := range tests {
		if got := UrgencyOf(today, tt.due, 3); got != tt.want {
			t.Errorf("UrgencyOf(%v) = %s, want %s", tt.due, got, tt.want)
		}
	}
}

func TestDay(t *testing.T) {
	// 23:30 UTC on 24 November is 00:30 on 25 November in Warsaw (UTC+1 in winter).
	if got := Day(time.Date(2026, 11, 24, 23, 30, 0, 0, time.UTC)); !got.Equal(Date(2026, 11, 25)) {
		t.Errorf("Day = %s", got)
	}
	// 22:30 UTC on 30 June is 00:30 on 1 July (UTC+2 in summer).
	if got := Day(time.Date(2026, 6, 30, 22, 30, 0, 0, time.UTC)); !got.Equal(Date(2026, 7, 1)) {
		t.Errorf("Day = %s", got)
	}
}
