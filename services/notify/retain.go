package notify

import (
	"context"
	"time"

	"lifeline/models"
)

// Retention is how long notification events, their finished deliveries (the delivery log)
// and in-app notifications are kept.
const Retention = 90 * 24 * time.Hour

// Retain deletes what is older than Retention: finished deliveries (sent, failed, digested;
// pending and sending ones stay until they finish), then events none of whose deliveries
// are left, then in-app notifications. It returns how many rows it deleted.
func (s *Service) Retain(ctx context.Context) (int64, error) {
	before := s.now().Add(-Retention)
	db := s.db.Conn(ctx)
	var n int64
	r := db.Where("created_at < ? AND status IN ?", before, []string{models.DeliverySent, models.DeliveryFailed, models.DeliveryDigested}).
		Delete(&models.NotificationDelivery{})
	if r.Error != nil {
		return n, r.Error
	}
	n += r.RowsAffected
	r = db.Where("created_at < ? AND NOT EXISTS (SELECT 1 FROM notification_deliveries d WHERE d.event_id = notification_events.id)", before).
		Delete(&models.NotificationEvent{})
	if r.Error != nil {
		return n, r.Error
	}
	n += r.RowsAffected
	r = db.Where("created_at < ?", before).Delete(&models.Notification{})
	return n + r.RowsAffected, r.Error
}
