package periods_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/models/modeltest"
	"lifeline/services/audit"
	"lifeline/services/periods"
)

func setup(t *testing.T, db *models.DB) (orgID, otherID string, admin audit.Actor) {
	t.Helper()
	ctx := context.Background()
	for _, id := range []*string{&orgID, &otherID} {
		o := models.Organization{ID: models.NewID(), Name: "Biuro " + models.NewID()[:8], CreatedAt: time.Now().UTC()}
		if err := db.Conn(ctx).Create(&o).Error; err != nil {
			t.Fatal(err)
		}
		*id = o.ID
	}
	u := models.User{ID: models.NewID(), Email: "szefowa-" + models.NewID()[:8] + "@biuro.test", Name: "Anna Szefowa", CreatedAt: time.Now().UTC()}
	if err := db.Conn(ctx).Create(&u).Error; err != nil {
		t.Fatal(err)
	}
	return orgID, otherID, audit.Actor{Type: audit.ActorUser, ID: u.ID}
}

func auditCount(t *testing.T, db *models.DB, org, action string) int64 {
	t.Helper()
	var n int64
	if err := db.Conn(context.Background()).Table("audit_log").Where("organization_id = ? AND action = ?", org, action).Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCloseListReopen: a month closed for one client and a quarter for every client are
// listed with who closed them; ClosedFor answers for the client's months and the quarter's
// months (for every client), not for an open month or another client's; closing again is a
// conflict naming who and when; reopening frees the month; both audited; another
// organization neither sees nor reopens them.
func TestCloseListReopen(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		org, other, admin := setup(t, db)
		at := time.Date(2026, 10, 5, 9, 30, 0, 0, time.UTC)
		svc := periods.New(db, func() time.Time { return at })
		m, err := svc.Close(ctx, org, admin, periods.Input{Period: " 2026-09 ", Client: " 5260001246 ", Note: " JPK_V7M wysłany "})
		if err != nil || m.Period != "2026-09" || m.Client != "5260001246" || m.Note != "JPK_V7M wysłany" || m.ClosedBy != "Anna Szefowa" || !m.ClosedAt.Equal(at) {
			t.Fatalf("close month: %v %+v", err, m)
		}
		at = at.Add(-time.Hour) // closed earlier: listed after the month
		q, err := svc.Close(ctx, org, admin, periods.Input{Period: "2026-q2", Note: "kwartał zamknięty"})
		if err != nil || q.Period != "2026-Q2" || q.Client != "" {
			t.Fatalf("close quarter: %v %+v", err, q)
		}
		list, err := svc.List(ctx, org)
		if err != nil || len(list) != 2 || list[0].ID != m.ID || list[1].ID != q.ID {
			t.Fatalf("list: %v %+v", err, list)
		}
		if l, _ := svc.List(ctx, other); len(l) != 0 {
			t.Errorf("the other organization sees %+v", l)
		}
		for _, c := range []struct {
			client, period, want string
		}{
			{"5260001246", "2026-09", m.ID},
			{"1111111111", "2026-09", ""},
			{"5260001246", "2026-08", ""},
			{"1111111111", "2026-05", q.ID},
			{"", "2026-04", q.ID},
			{"5260001246", "2026-Q2", q.ID},
			{"5260001246", "2026-Q3", ""}, // a closed month does not close its quarter
			{"5260001246", "2026", ""},
			{"5260001246", "", ""},
		} {
			got, err := svc.ClosedFor(ctx, org, c.client, c.period)
			if err != nil {
				t.Fatal(err)
			}
			if id := idOf(got); id != c.want {
				t.Errorf("ClosedFor(%q, %q) = %q, want %q", c.client, c.period, id, c.want)
			}
			if got, _ := svc.ClosedFor(ctx, other, c.client, c.period); got != nil {
				t.Errorf("another organization's ClosedFor(%q, %q) = %+v", c.client, c.period, got)
			}
		}
		_, err = svc.Close(ctx, org, admin, periods.Input{Period: "2026-09", Client: "5260001246", Note: "again"})
		if apperr.ErrorCode(err) != apperr.ECONFLICT || !strings.Contains(err.Error(), "Anna Szefowa") || !strings.Contains(err.Error(), "on 2026-10-05 09:30 UTC") {
			t.Errorf("closing again: %v", err)
		}
		if _, err := svc.Reopen(ctx, other, m.ID, admin); apperr.ErrorCode(err) != apperr.ENOTFOUND {
			t.Errorf("another organization reopens: %v", err)
		}
		if _, err := svc.Reopen(ctx, org, m.ID, admin); err != nil {
			t.Fatal(err)
		}
		if got, _ := svc.ClosedFor(ctx, org, "5260001246", "2026-09"); got != nil {
			t.Errorf("reopened month still closed: %+v", got)
		}
		if _, err := svc.Reopen(ctx, org, m.ID, admin); apperr.ErrorCode(err) != apperr.ENOTFOUND {
			t.Errorf("reopen twice: %v", err)
		}
		if n := auditCount(t, db, org, "period.closed"); n != 2 {
			t.Errorf("period.closed audited %d times", n)
		}
		if n := auditCount(t, db, org, "period.reopened"); n != 1 {
			t.Errorf("period.reopened audited %d times", n)
		}
	})
}

func idOf(c *periods.Closed) string {
	if c == nil {
		return ""
	}
	return c.ID
}

// TestCloseRefusesBadInput: each bad field has its message, and nothing is written.
func TestCloseRefusesBadInput(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		org, _, admin := setup(t, db)
		svc := periods.New(db, nil)
		for _, c := range []struct {
			in    periods.Input
			field string
		}{
			{periods.Input{Period: "", Note: "x"}, "period"},
			{periods.Input{Period: "2026-13", Note: "x"}, "period"},
			{periods.Input{Period: "wrzesień", Note: "x"}, "period"},
			{periods.Input{Period: "2026-09", Note: "  "}, "note"},
			{periods.Input{Period: "2026-09", Client: strings.Repeat("k", 201), Note: "x"}, "client"},
			{periods.Input{Period: "2026-09", Client: "a\nb", Note: "x"}, "client"},
		} {
			_, err := svc.Close(ctx, org, admin, c.in)
			var ae *apperr.Error
			if !asApp(err, &ae) || ae.Code != apperr.EINVALID || ae.Fields[c.field] == "" {
				t.Errorf("%+v: %v", c.in, err)
			}
		}
		if l, _ := svc.List(ctx, org); len(l) != 0 {
			t.Errorf("written: %+v", l)
		}
		if n := auditCount(t, db, org, "period.closed"); n != 0 {
			t.Errorf("audited %d", n)
		}
	})
}

func asApp(err error, ae **apperr.Error) bool {
	e, ok := err.(*apperr.Error)
	*ae = e
	return ok
}

// TestClosePeriodIsGuarded: of two admins closing the same period at once one wins, the
// other gets the conflict; ReopenPeriod reports its lost case (already reopened) and
// changes nothing.
func TestClosePeriodIsGuarded(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		org, _, admin := setup(t, db)
		svc := periods.New(db, nil)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = svc.Close(ctx, org, admin, periods.Input{Period: "2026-09", Note: "n"})
			}()
		}
		wg.Wait()
		won, lost := 0, 0
		for _, err := range errs {
			switch apperr.ErrorCode(err) {
			case apperr.ECONFLICT:
				lost++
			default:
				if err != nil {
					t.Fatal(err)
				}
				won++
			}
		}
		if won != 1 || lost != 1 {
			t.Fatalf("won %d lost %d: %v", won, lost, errs)
		}
		// The lost insert, in a transaction that goes on (PostgreSQL: a savepoint).
		err := db.Tx(ctx, func(tx *gorm.DB) error {
			ok, err := models.ClosePeriod(tx, &models.ClosedPeriod{ID: models.NewID(), OrganizationID: org, Period: "2026-09", Note: "n", ClosedByType: "user", ClosedAt: time.Now().UTC()})
			if err != nil || ok {
				t.Errorf("second close: %v %v", ok, err)
			}
			var n int64
			return tx.Model(&models.ClosedPeriod{}).Where("organization_id = ?", org).Count(&n).Error
		})
		if err != nil {
			t.Fatal(err)
		}
		l, _ := svc.List(ctx, org)
		err = db.Tx(ctx, func(tx *gorm.DB) error {
			if ok, err := models.ReopenPeriod(tx, org, l[0].ID); err != nil || !ok {
				t.Errorf("reopen: %v %v", ok, err)
			}
			if ok, err := models.ReopenPeriod(tx, org, l[0].ID); err != nil || ok {
				t.Errorf("reopen lost: %v %v", ok, err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}
