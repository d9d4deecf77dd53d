package notify

import (
	"context"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// TestDeliveryTransitions: every transition of a notification delivery wins from the state
// it expects and loses, writing nothing, from another (already taken, a claim moved on, a
// status changed), on SQLite and PostgreSQL.
func TestDeliveryTransitions(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		org := models.Organization{ID: models.NewID(), Name: "Biuro"}
		if err := db.Conn(ctx).Create(&org).Error; err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC()
		delivery := func(status string, token *string, leaseUntil *time.Time) *models.NotificationDelivery {
			d := &models.NotificationDelivery{ID: models.NewID(), OrganizationID: org.ID, WorkflowID: models.NewID(), ExecutionID: models.NewID(),
				Channel: "email", Recipient: "a@example.com", EventKind: "dlq", Status: status, NextAttemptAt: now.Add(-time.Minute),
				ClaimToken: token, LeaseUntil: leaseUntil, WindowStart: now, DedupKey: models.NewID(), CreatedAt: now, UpdatedAt: now}
			if err := db.Conn(ctx).Create(d).Error; err != nil {
				t.Fatal(err)
			}
			return d
		}
		status := func(d *models.NotificationDelivery) string {
			var got models.NotificationDelivery
			if err := db.Conn(ctx).First(&got, "id = ?", d.ID).Error; err != nil {
				t.Fatal(err)
			}
			return got.Status
		}
		tok := func() *string { s := models.NewID(); return &s }
		past, future := now.Add(-time.Second), now.Add(time.Hour)
		cases := []struct {
			name   string
			d      *models.NotificationDelivery
			run    func(d *models.NotificationDelivery) (bool, error)
			won    bool
			status string
		}{
			{"ClaimDelivery: pending and due", delivery(models.DeliveryPending, nil, nil), claim(ctx, db, now), true, models.DeliverySending},
			{"ClaimDelivery: sending, its lease ran out", delivery(models.DeliverySending, tok(), &past), claim(ctx, db, now), true, models.DeliverySending},
			{"ClaimDelivery lost: taken, its lease runs", delivery(models.DeliverySending, tok(), &future), claim(ctx, db, now), false, models.DeliverySending},
			{"ClaimDelivery lost: sent already", delivery(models.DeliverySent, nil, nil), claim(ctx, db, now), false, models.DeliverySent},
			{"FinishDelivery: sent", delivery(models.DeliverySending, tok(), &future), finish(ctx, db, now, nil), true, models.DeliverySent},
			{"FinishDelivery lost: another dispatcher's claim now", delivery(models.DeliverySending, tok(), &future), finish(ctx, db, now, tok()), false, models.DeliverySending},
			{"FinishDelivery lost: not sending (failed meanwhile)", delivery(models.DeliveryFailed, tok(), nil), finish(ctx, db, now, nil), false, models.DeliveryFailed},
			{"ResendDelivery: failed", delivery(models.DeliveryFailed, nil, nil), resend(ctx, db, now, ""), true, models.DeliveryPending},
			{"ResendDelivery lost: changed since it was read", delivery(models.DeliverySending, tok(), &future), resend(ctx, db, now, models.DeliverySent), false, models.DeliverySending},
			{"ResendDelivery lost: pending", delivery(models.DeliveryPending, nil, nil), resend(ctx, db, now, ""), false, models.DeliveryPending},
			{"AttachToDigest: pending", delivery(models.DeliveryPending, nil, nil), attach(ctx, db, now), true, models.DeliveryPending},
			{"AttachToDigest lost: taken for sending", delivery(models.DeliverySending, tok(), &future), attach(ctx, db, now), false, models.DeliverySending},
			{"AttachToDigest lost: sent", delivery(models.DeliverySent, nil, nil), attach(ctx, db, now), false, models.DeliverySent},
		}
		for _, c := range cases {
			won, err := c.run(c.d)
			if err != nil || won != c.won || status(c.d) != c.status {
				t.Errorf("%s: won %v (%v), status %s; want won %v, status %s", c.name, won, err, status(c.d), c.won, c.status)
			}
		}
	})
}

func claim(ctx context.Context, db *models.DB, now time.Time) func(d *models.NotificationDelivery) (bool, error) {
	return func(d *models.NotificationDelivery) (bool, error) {
		tok, err := ClaimDelivery(db.Conn(ctx), d.ID, now, time.Minute)
		return tok != "", err
	}
}

// finish records d sent under its own claim token, or under token when one is given.
func finish(ctx context.Context, db *models.DB, now time.Time, token *string) func(d *models.NotificationDelivery) (bool, error) {
	return func(d *models.NotificationDelivery) (bool, error) {
		if token != nil {
			d.ClaimToken = token
		}
		return FinishDelivery(db.Conn(ctx), d, models.DeliverySent, now, map[string]any{"sent_at": now})
	}
}

// resend queues d again as read in status (its own when "").
func resend(ctx context.Context, db *models.DB, now time.Time, status string) func(d *models.NotificationDelivery) (bool, error) {
	return func(d *models.NotificationDelivery) (bool, error) {
		if status != "" {
			d.Status = status
		}
		return ResendDelivery(db.Conn(ctx), d, now)
	}
}

func attach(ctx context.Context, db *models.DB, now time.Time) func(d *models.NotificationDelivery) (bool, error) {
	return func(d *models.NotificationDelivery) (bool, error) { return AttachToDigest(db.Conn(ctx), d.ID, now) }
}
