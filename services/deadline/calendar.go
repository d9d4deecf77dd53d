// Package deadline knows Polish filing deadlines: the public holidays of any year, the
// statutory rule that moves a due date off a Saturday, Sunday or public holiday to the next
// working day (Ordynacja podatkowa, art. 12 § 5), the due dates of the obligations an office
// files for a period, and how urgent a due date is on a given day.
//
// Dates are civil dates: a time.Time at midnight UTC standing for a day in Poland. Day turns
// an instant into the day it is in Warsaw.
package deadline

import (
	"time"
	_ "time/tzdata" // Europe/Warsaw wherever the binary runs
)

var warsaw = mustLoad("Europe/Warsaw")

func mustLoad(name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		panic(err) // time/tzdata is linked in: this cannot happen
	}
	return loc
}

// Date returns the civil date y-m-d.
func Date(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC) }

// Day returns the day t falls on in Poland.
func Day(t time.Time) time.Time {
	y, m, d := t.In(warsaw).Date()
	return Date(y, m, d)
}

// Easter returns Easter Sunday of the Gregorian year y (the anonymous Gregorian algorithm).
func Easter(y int) time.Time {
	a := y % 19
	b, c := y/100, y%100
	d, e := b/4, b%4
	f := (b + 8) / 25
	g := (b - f + 1) / 3
	h := (19*a + b - d - g + 15) % 30
	i, k := c/4, c%4
	l := (32 + 2*e + 2*i - h - k) % 7
	m := (a + 11*h + 22*l) / 451
	month := (h + l - 7*m + 114) / 31
	day := (h+l-7*m+114)%31 + 1
	return Date(y, time.Month(month), day)
}

// Holidays returns Poland's public holidays (dni ustawowo wolne od pracy) of year y in date
// order: New Year, Epiphany (from 2011), Easter Sunday and Monday, 1 and 3 May, Pentecost
// Sunday, Corpus Christi, 15 August, 1 and 11 November, Christmas Eve (from 2025), and 25 and
// 26 December.
func Holidays(y int) []time.Time {
	e := Easter(y)
	days := []time.Time{Date(y, time.January, 1)}
	if y >= 2011 {
		days = append(days, Date(y, time.January, 6))
	}
	days = append(days, e, e.AddDate(0, 0, 1))
	// Pentecost (Easter + 49) and Corpus Christi (Easter + 60) never fall before 3 May.
	days = append(days, Date(y, time.May, 1), Date(y, time.May, 3), e.AddDate(0, 0, 49), e.AddDate(0, 0, 60))
	days = append(days, Date(y, time.August, 15), Date(y, time.November, 1), Date(y, time.November, 11))
	if y >= 2025 {
		days = append(days, Date(y, time.December, 24))
	}
	return append(days, Date(y, time.December, 25), Date(y, time.December, 26))
}

// IsHoliday reports whether d is a public holiday.
func IsHoliday(d time.Time) bool {
	d = civil(d)
	for _, h := range Holidays(d.Year()) {
		if h.Equal(d) {
			return true
		}
	}
	return false
}

// IsWorkingDay reports whether d is neither a Saturday, a Sunday nor a public holiday.
func IsWorkingDay(d time.Time) bool {
	switch d.Weekday() {
	case time.Saturday, time.Sunday:
		return false
	}
	return !IsHoliday(d)
}

// NextWorkingDay returns d when it is a working day, else the first working day after it:
// where a deadline falls on a day off it ends on the next working day.
func NextWorkingDay(d time.Time) time.Time {
	d = civil(d)
	for !IsWorkingDay(d) {
		d = d.AddDate(0, 0, 1)
	}
	return d
}

// WorkingDaysLeft returns how many working days after today there are up to and including
// due: 0 when due is today, 1 when it is the next working day, and so on. An overdue date gives a negative count: minus the working
// days from the day after due up to and including today.
func WorkingDaysLeft(today, due time.Time) int {
	today, due = civil(today), civil(due)
	if due.Before(today) {
		return -countWorking(due, today)
	}
	return countWorking(today, due)
}

// AddWorkingDays returns the n-th working day after d (d itself when n is 0 or less): the
// last due date that is n working days away, for "at risk within n working days".
func AddWorkingDays(d time.Time, n int) time.Time {
	d = civil(d)
	for ; n > 0; n-- {
		d = d.AddDate(0, 0, 1)
		for !IsWorkingDay(d) {
			d = d.AddDate(0, 0, 1)
		}
	}
	return d
}

// SubWorkingDays returns the n-th working day before d (d itself when n is 0 or less).
func SubWorkingDays(d time.Time, n int) time.Time {
	d = civil(d)
	for ; n > 0; n-- {
		d = d.AddDate(0, 0, -1)
		for !IsWorkingDay(d) {
			d = d.AddDate(0, 0, -1)
		}
	}
	return d
}

// StartOf returns the instant the civil date d begins in Poland (midnight, Warsaw time).
func StartOf(d time.Time) time.Time {
	y, m, day := civil(d).Date()
	return time.Date(y, m, day, 0, 0, 0, 0, warsaw)
}

// countWorking counts the working days d with from < d ≤ to.
func countWorking(from, to time.Time) int {
	n := 0
	for d := from.AddDate(0, 0, 1); !d.After(to); d = d.AddDate(0, 0, 1) {
		if IsWorkingDay(d) {
			n++
		}
	}
	return n
}

// civil drops the time of day of a date (its own location's calendar day).
func civil(t time.Time) time.Time {
	y, m, d := t.Date()
	return Date(y, m, d)
}
