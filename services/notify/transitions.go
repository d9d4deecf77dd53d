package notify

import (
	"time"

	"gorm.io/gorm"

	"lifeline/models"
)

// The guarded transitions of notification deliveries. Each changes a delivery only from the
// state it expects (a guard in the WHERE clause: its status and, once claimed, the claim
// token of the dispatcher that holds it) and reports whether it won: a lost transition
// writes nothing. The same statement runs on PostgreSQL and SQLite; callers never write a
// delivery's status themselves. TestDeliveryTransitions runs each, winning and losing, on
// both databases.

// ClaimDelivery takes delivery id for one send if it is still due (pending and due by now,
// or sending with a lease that ran out): sending, under a new claim token, leased until
// now+lease, one more attempt. It returns the token, or "" when it lost (someone else has
// it, or it is done).
func ClaimDelivery(conn *gorm.DB, id string, now time.Time, lease time.Duration) (string, error) {
	tok := models.NewID()
	res := conn.Model(&models.NotificationDelivery{}).
		Where("id = ? AND ((status = ? AND next_attempt_at <= ?) OR (status = ? AND lease_until < ?))",
			id, models.DeliveryPending, now, models.DeliverySending, now).
		Updates(map[string]any{"status": models.DeliverySending, "claim_token": tok, "lease_until": now.Add(lease),
			"attempts": gorm.Expr("attempts + 1"), "updated_at": now})
	if res.Error != nil || res.RowsAffected == 0 {
		return "", res.Error
	}
	return tok, nil
}

// FinishDelivery records the outcome of a claimed delivery's send (sending under its claim
// token d.ClaimToken): sent, failed, or pending again for a retry, with the fields given
// (error, schedule; not its status), its lease released. Lost (false) when the claim is no
// longer d's (the lease ran out and another dispatcher took it over).
func FinishDelivery(conn *gorm.DB, d *models.NotificationDelivery, status string, now time.Time, fields map[string]any) (bool, error) {
	upd := map[string]any{"status": status, "lease_until": nil, "updated_at": now}
	for k, v := range fields {
		upd[k] = v
	}
	res := conn.Model(&models.NotificationDelivery{}).Where("id = ? AND status = ? AND claim_token = ?", d.ID, models.DeliverySending, *d.ClaimToken).
		Updates(upd)
	return res.RowsAffected == 1, res.Error
}

// ResendDelivery queues delivery d, sent or failed (as d.Status was read), to be sent again
// at now, its attempts counted afresh and its claim dropped. Lost (false) when it is not in
// the status it was read in any more.
func ResendDelivery(conn *gorm.DB, d *models.NotificationDelivery, now time.Time) (bool, error) {
	res := conn.Model(&models.NotificationDelivery{}).Where("id = ? AND status = ? AND status IN ?", d.ID, d.Status,
		[]string{models.DeliverySent, models.DeliveryFailed}).Updates(map[string]any{
		"status": models.DeliveryPending, "attempts": 0, "next_attempt_at": now, "claim_token": nil, "lease_until": nil, "updated_at": now})
	return res.RowsAffected == 1, res.Error
}

// AttachToDigest holds digest id, still pending (not taken for sending), for a delivery
// about to be folded into it in tx: it touches the digest under that guard, so a dispatcher's
// ClaimDelivery of it waits for tx (PostgreSQL's row lock; SQLite's one writer) and then
// reads the folded delivery with it. Lost (false) when the digest was taken already: the
// delivery must go elsewhere.
func AttachToDigest(tx *gorm.DB, id string, now time.Time) (bool, error) {
	res := tx.Model(&models.NotificationDelivery{}).Where("id = ? AND status = ?", id, models.DeliveryPending).
		Update("updated_at", now)
	return res.RowsAffected == 1, res.Error
}
