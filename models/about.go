package models

import (
	"cmp"
	"strconv"

	"gorm.io/gorm"
)

// AboutFilter narrows a list of executions or dead letters by what they are about (issue
// 23). Zero fields do not filter.
type AboutFilter struct {
	// Client, Period and Obligation match exactly; DueBefore (YYYY-MM-DD) keeps what is due
	// on or before that day.
	Client, Period, Obligation, DueBefore string
}

// where adds f's conditions over table (workflow_executions or dead_letter_queue). The caller
// checked DueBefore is a date (YYYY-MM-DD): it is compared as text.
func (f AboutFilter) where(q *gorm.DB, table string) *gorm.DB {
	for col, v := range map[string]string{"client": f.Client, "period": f.Period, "obligation": f.Obligation} {
		if v != "" {
			q = q.Where(table+"."+col+" = ?", v)
		}
	}
	if f.DueBefore != "" {
		q = q.Where(table+".due_on <= ?", f.DueBefore)
	}
	return q
}

// noDue is the due date the orders give work without one: after every real one; noAmount
// the amount (below every real one, refunds included).
const (
	noDue    = "9999-12-31"
	noAmount = -9000000000000000000
)

// aboutSorts are the orders by due date ("due": soonest first, none last) and by amount
// ("amount": largest first, none last) of table's list, each "-" the other way round, over
// the expressions migration 00032 indexes.
func aboutSorts(table string) []listSort {
	due := sortKey{"COALESCE(" + table + ".due_on, '" + noDue + "')", keyText}
	amount := sortKey{"COALESCE(" + table + ".amount_minor, " + strconv.Itoa(noAmount) + ")", keyBig}
	return []listSort{
		{name: "due", keys: []sortKey{due}},
		{name: "-due", keys: []sortKey{due}, desc: true},
		{name: "amount", keys: []sortKey{amount}, desc: true},
		{name: "-amount", keys: []sortKey{amount}},
	}
}

// sortValue is a's value of an about order's key (false for another order).
func (a About) sortValue(s listSort) (any, bool) {
	switch s.name {
	case "due", "-due":
		return cmp.Or(deref(a.DueOn), noDue), true
	case "amount", "-amount":
		if a.AmountMinor == nil {
			return int64(noAmount), true
		}
		return *a.AmountMinor, true
	}
	return nil, false
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
