package deadline

import (
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// The built-in obligations, and Custom for a rule of the workflow's own.
const (
	JPKV7M     = "JPK_V7M"     // VAT return with records, monthly: 25th of the next month
	JPKV7K     = "JPK_V7K"     // quarterly declaration, monthly records: 25th after the quarter (or month)
	ZUS        = "ZUS"         // social insurance: the organization's day (15th or 20th) of the next month
	PITAdvance = "PIT_ADVANCE" // PIT advance: 20th of the next month (or after the quarter)
	CITAdvance = "CIT_ADVANCE" // CIT advance: 20th of the next month (or after the quarter)
	PIT4R      = "PIT_4R"      // the employer's annual PIT-4R: end of January after the year
	Custom     = "custom"      // DayOfMonth of the MonthsAfterPeriod-th month after the period
)

// Obligations are the names a workflow's obligation may take.
var Obligations = []string{JPKV7M, JPKV7K, ZUS, PITAdvance, CITAdvance, PIT4R, Custom}

// Obligation is a filing rule: a built-in name, or Custom with its day and months.
type Obligation struct {
	Name string
	// DayOfMonth (1-31; a day past the month's end is its last day) and MonthsAfterPeriod
	// (0-24, counted from the period's last month) are Custom's rule.
	DayOfMonth        int
	MonthsAfterPeriod int
}

// Settings are an organization's choices the rules depend on.
type Settings struct {
	// ZUSDay is the day of the month ZUS contributions are due: 15 or 20 (anything else is 20).
	ZUSDay int
}

// Period is what an execution is about in time: a month (2026-10), a quarter (2026-Q3) or a
// year (2026).
type Period struct {
	Year    int
	Month   int // 1-12 for a month, else 0
	Quarter int // 1-4 for a quarter, else 0
}

var periodRE = regexp.MustCompile(`^(\d{4})(?:-(?:(\d{2})|[Qq]([1-4])))?$`)

// ParsePeriod reads YYYY-MM, YYYY-Qn or YYYY.
func ParsePeriod(s string) (Period, error) {
	m := periodRE.FindStringSubmatch(s)
	if m == nil {
		return Period{}, fmt.Errorf("%q is not a period: write YYYY-MM, YYYY-Qn or YYYY", s)
	}
	y, _ := strconv.Atoi(m[1])
	p := Period{Year: y}
	switch {
	case m[2] != "":
		p.Month, _ = strconv.Atoi(m[2])
		if p.Month < 1 || p.Month > 12 {
			return Period{}, fmt.Errorf("%q is not a period: the month must be 01-12", s)
		}
	case m[3] != "":
		p.Quarter, _ = strconv.Atoi(m[3])
	}
	return p, nil
}

// String writes the period as ParsePeriod reads it.
func (p Period) String() string {
	switch {
	case p.Month > 0:
		return fmt.Sprintf("%04d-%02d", p.Year, p.Month)
	case p.Quarter > 0:
		return fmt.Sprintf("%04d-Q%d", p.Year, p.Quarter)
	}
	return fmt.Sprintf("%04d", p.Year)
}

// lastMonth is the period's last month (December for a year).
func (p Period) lastMonth() time.Month {
	switch {
	case p.Month > 0:
		return time.Month(p.Month)
	case p.Quarter > 0:
		return time.Month(3 * p.Quarter)
	}
	return time.December
}

// Contains reports whether day d falls in the period.
func (p Period) Contains(d time.Time) bool {
	if d.Year() != p.Year {
		return false
	}
	m := int(d.Month())
	switch {
	case p.Month > 0:
		return m == p.Month
	case p.Quarter > 0:
		return (m-1)/3+1 == p.Quarter
	}
	return true
}

// Due returns the day obligation o for period p must be filed or paid by, moved off days
// off to the next working day. A rule that does not fit the period (JPK_V7M for a quarter, a
// monthly obligation for a whole year) or a Custom rule out of range is an error that says so.
func Due(o Obligation, p Period, s Settings) (time.Time, error) {
	day, after := 0, 1
	switch o.Name {
	case JPKV7M:
		if p.Month == 0 {
			return time.Time{}, fmt.Errorf("%s is monthly: its period is YYYY-MM, not %s", o.Name, p)
		}
		day = 25
	case JPKV7K:
		if p.Month == 0 && p.Quarter == 0 {
			return time.Time{}, fmt.Errorf("%s is for a quarter (YYYY-Qn) or a month of records (YYYY-MM), not %s", o.Name, p)
		}
		day = 25
	case ZUS:
		if p.Month == 0 {
			return time.Time{}, fmt.Errorf("%s is monthly: its period is YYYY-MM, not %s", o.Name, p)
		}
		day = 20
		if s.ZUSDay == 15 {
			day = 15
		}
	case PITAdvance, CITAdvance:
		if p.Month == 0 && p.Quarter == 0 {
			return time.Time{}, fmt.Errorf("%s is paid for a month or a quarter, not %s", o.Name, p)
		}
		day = 20
	case PIT4R:
		// The year's return is due at the end of January after it, whichever part of the
		// year the period names.
		return NextWorkingDay(Date(p.Year+1, time.January, 31)), nil
	case Custom:
		if o.DayOfMonth < 1 || o.DayOfMonth > 31 {
			return time.Time{}, fmt.Errorf("dayOfMonth must be 1-31, not %d", o.DayOfMonth)
		}
		if o.MonthsAfterPeriod < 0 || o.MonthsAfterPeriod > 24 {
			return time.Time{}, fmt.Errorf("monthsAfterPeriod must be 0-24, not %d", o.MonthsAfterPeriod)
		}
		day, after = o.DayOfMonth, o.MonthsAfterPeriod
	default:
		return time.Time{}, fmt.Errorf("unknown obligation %q", o.Name)
	}
	first := Date(p.Year, p.lastMonth(), 1).AddDate(0, after, 0)
	if last := first.AddDate(0, 1, -1).Day(); day > last {
		day = last
	}
	return NextWorkingDay(Date(first.Year(), first.Month(), day)), nil
}

// Urgency orders due dates from the most pressing: Overdue, DueToday, AtRisk (within the
// organization's working days), Later, and None for work with no due date.
type Urgency int

const (
	Overdue Urgency = iota
	DueToday
	AtRisk
	Later
	None
)

var urgencyNames = [...]string{"overdue", "due_today", "at_risk", "later", "none"}

// String names the urgency for the API and filters.
func (u Urgency) String() string { return urgencyNames[u] }

// UrgencyOf says how urgent due is on today when work due within within working days is at
// risk; a nil due is None.
func UrgencyOf(today time.Time, due *time.Time, within int) Urgency {
	if due == nil {
		return None
	}
	today, d := civil(today), civil(*due)
	switch {
	case d.Before(today):
		return Overdue
	case d.Equal(today):
		return DueToday
	case !d.After(AddWorkingDays(today, within)):
		return AtRisk
	}
	return Later
}
