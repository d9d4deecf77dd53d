package notify_test

import (
	"context"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/notify"
)

func TestRetainDeletesOnlyOldFinishedNotifications(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		e := newEnv(t, db)
		ctx := context.Background()
		e.settings(t, e.org.id, `{"channels": ["app"], "recipients": ["role:admin"]}`)
		e.emit(t, e.dlqEvent(models.NewID())) // sent, then old
		e.dispatch(t)
		stuck := e.dlqEvent(models.NewID()) // old but never sent: kept
		e.settings(t, e.org.id, `{"channels": ["email"], "recipients": ["nobody-yet@biuro.example"]}`)
		e.emit(t, stuck)
		// Its retry is far off: it stays pending.
		db.Conn(ctx).Model(&models.NotificationDelivery{}).Where("execution_id = ?", stuck.ExecutionID).Update("next_attempt_at", e.clk.Now().AddDate(1, 0, 0))
		e.clk.Add(notify.Retention + time.Hour)
		e.settings(t, e.org.id, `{"channels": ["app"], "recipients": ["role:admin"]}`)
		e.emit(t, e.dlqEvent(models.NewID())) // recent
		e.dispatch(t)
		count := func(m any) int64 {
			var n int64
			db.Conn(ctx).Model(m).Where("organization_id = ?", e.org.id).Count(&n)
			return n
		}
		if count(&models.NotificationDelivery{}) != 3 || count(&models.Notification{}) != 2 || count(&models.NotificationEvent{}) != 3 {
			t.Fatalf("before: %d deliveries, %d in-app, %d events", count(&models.NotificationDelivery{}), count(&models.Notification{}), count(&models.NotificationEvent{}))
		}
		n, err := e.svc.Retain(ctx)
		if err != nil || n < 2 { // (the in-app row may go with its delivery, by cascade)
			t.Fatalf("deleted %d, %v; want the old delivery, its event and its in-app notification", n, err)
		}
		var left []models.NotificationDelivery
		db.Conn(ctx).Where("organization_id = ?", e.org.id).Order("created_at").Find(&left)
		if len(left) != 2 || left[0].ExecutionID != stuck.ExecutionID || left[0].Status == models.DeliverySent || count(&models.Notification{}) != 1 || count(&models.NotificationEvent{}) != 2 {
			t.Errorf("left %+v", left)
		}
	})
}
