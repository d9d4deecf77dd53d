package engine

import (
	"context"
	"strings"

	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/models/apperr"
)

// who reads the user's email and the starter of iv's execution, for mayAnswer.
func (a Asks) who(ctx context.Context, iv *models.Intervention, userID string) (email, starter string, err error) {
	var u models.User
	if err := a.e.db.Conn(ctx).Select("id, email").Where("id = ?", userID).Limit(1).Find(&u).Error; err != nil {
		return "", "", err
	}
	var ex models.Execution
	if err := a.e.db.Conn(ctx).Select("id, created_by").Where("id = ? AND organization_id = ?", iv.ExecutionID, iv.OrganizationID).Limit(1).Find(&ex).Error; err != nil {
		return "", "", err
	}
	return u.Email, deref(ex.CreatedBy), nil
}

// Who may answer a request: viewers never; admins and owners any; accountants those whose
// holders name role:accountant, their email or their id. Four-eyes bars the users in
// Barred (who started the execution or edited its input) whatever their role.

// mayAnswer says whether the user (id, email, role) may answer iv now, and if not why;
// starter is who started its execution (four-eyes says which reason bars them).
func mayAnswer(iv *models.Intervention, userID, email, role, starter string) (bool, string) {
	switch {
	case iv.Status == models.InterventionAnswered:
		return false, "This request was answered already."
	case iv.Status == models.InterventionTimedOut:
		return false, "This request has timed out."
	case iv.Status == models.InterventionCancelled:
		return false, "This request was cancelled."
	case role == models.RoleViewer || role == "":
		return false, "Viewers cannot answer requests."
	}
	if contains(iv.Barred, userID) {
		if userID == starter {
			return false, "Four-eyes: you started this execution."
		}
		return false, "Four-eyes: you edited its input."
	}
	if role == models.RoleAdmin || role == models.RoleOwner {
		return true, ""
	}
	for _, h := range holderKeys(userID, email, role) {
		if contains(iv.Holders, h) {
			return true, ""
		}
	}
	return false, "This request is for someone else."
}

// holderKeys are the holder entries that name the user: their role, email and id.
func holderKeys(userID, email, role string) []string {
	keys := []string{"role:" + role}
	if email != "" {
		keys = append(keys, strings.ToLower(email))
	}
	if userID != "" {
		keys = append(keys, strings.ToLower(userID))
	}
	if role == models.RoleOwner {
		keys = append(keys, "role:"+models.RoleAdmin)
	}
	return keys
}

// openFor is the query of the organization's open requests assigned to the user (of role:
// their holders name them) that they may answer now; nil for a role that answers none.
func (a Asks) openFor(ctx context.Context, orgID, userID, role string) (*gorm.DB, error) {
	if role == models.RoleViewer || role == "" {
		return nil, nil
	}
	q := a.e.db.Conn(ctx).Model(&models.Intervention{}).Where("organization_id = ? AND status = ?", orgID, models.InterventionOpen)
	return a.mine(ctx, q, userID, role, true)
}

// mine narrows q to the requests the user may answer (holders and four-eyes): for an admin
// or owner every request, unless assigned (then those whose holders name them).
func (a Asks) mine(ctx context.Context, q *gorm.DB, userID, role string, assigned bool) (*gorm.DB, error) {
	pg := a.e.db.Dialect == models.Postgres
	if pg {
		q = q.Where("NOT (? = ANY(interventions.barred))", userID)
	} else {
		q = q.Where("NOT EXISTS (SELECT 1 FROM json_each(interventions.barred) WHERE json_each.value = ?)", userID)
	}
	if (role == models.RoleAdmin || role == models.RoleOwner) && !assigned {
		return q, nil
	}
	var u models.User
	if err := a.e.db.Conn(ctx).Select("id, email").Where("id = ?", userID).Limit(1).Find(&u).Error; err != nil {
		return nil, err
	}
	keys := holderKeys(userID, u.Email, role)
	if pg {
		return q.Where("interventions.holders && ?", models.StringList(keys)), nil
	}
	return q.Where("EXISTS (SELECT 1 FROM json_each(interventions.holders) WHERE json_each.value IN ?)", keys), nil
}

// list is List.
func (a Asks) list(ctx context.Context, orgID string, f models.InterventionFilter) ([]models.Intervention, error) {
	q := a.e.db.Conn(ctx).Model(&models.Intervention{}).Where("organization_id = ?", orgID)
	if f.Status != "" {
		if !contains(models.InterventionStatuses, f.Status) {
			return nil, apperr.Invalid("The filter is not valid.", map[string]string{"status": "must be one of open, answered, timed_out, cancelled"})
		}
		q = q.Where("status = ?", f.Status)
	}
	if f.ExecutionID != "" {
		q = q.Where("execution_id = ?", f.ExecutionID)
	}
	if f.Mine {
		if f.Role == models.RoleViewer || f.Role == "" {
			return []models.Intervention{}, nil
		}
		q = q.Where("status = ?", models.InterventionOpen)
		var err error
		if q, err = a.mine(ctx, q, f.UserID, f.Role, f.Assigned); err != nil {
			return nil, err
		}
	}
	limit := f.Limit
	if limit <= 0 || limit > 500 {
		limit = 100
	}
	out := []models.Intervention{}
	err := q.Order("expires_at, id").Limit(limit).Find(&out).Error
	return out, err
}

// checkLink is CheckLink.
func (a Asks) checkLink(ctx context.Context, orgID, id, userID, token string) (LinkCheck, error) {
	if token == "" {
		return LinkUnknownToken, nil
	}
	var l models.InterventionLink
	if err := a.e.db.Conn(ctx).Where("token_hash = ? AND organization_id = ? AND intervention_id = ?", hashToken(token), orgID, id).
		Limit(1).Find(&l).Error; err != nil {
		return "", err
	}
	if l.ID == "" {
		return LinkUnknownToken, nil
	}
	if l.UserID != userID {
		return LinkOtherUser, nil
	}
	if l.UsedAt != nil {
		return LinkUsed, nil
	}
	now, err := a.e.now(ctx)
	if err != nil {
		return "", err
	}
	if !l.ExpiresAt.After(now) {
		return LinkExpired, nil
	}
	var iv models.Intervention
	if err := a.e.db.Conn(ctx).Select("status").Where("id = ?", id).Limit(1).Find(&iv).Error; err != nil {
		return "", err
	}
	if iv.Status != models.InterventionOpen {
		return LinkExpired, nil
	}
	return LinkValid, nil
}
