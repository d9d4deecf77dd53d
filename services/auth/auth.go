// Package auth manages organizations, users, memberships and API tokens, and checks
// credentials. Passwords are argon2id hashes; API tokens are stored as SHA-256 hashes and
// shown once, at creation.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net/mail"
	"strings"
	"time"

	"github.com/alexedwards/argon2id"
	"gorm.io/gorm"

	"lifeline/models"
)

// Service is the auth service.
type Service struct {
	DB *models.DB
	// Params are the argon2id parameters (argon2id.DefaultParams when nil).
	Params *argon2id.Params
}

// Principal is who is acting within one organization.
type Principal struct {
	OrganizationID string
	OrgName        string
	Role           string
	UserID         string // empty for API tokens
	Email          string
	TokenID        string // empty for users
}

// Can reports whether the principal's role is at least min.
func (p *Principal) Can(min string) bool { return p != nil && models.RoleAtLeast(p.Role, min) }

// CreateOrg creates an organization.
func (s *Service) CreateOrg(ctx context.Context, name string) (*models.Organization, error) {
	name = strings.TrimSpace(name)
	if name == "" || len(name) > 200 {
		return nil, models.Invalid("Invalid organization.", map[string]string{"name": "is required, at most 200 characters"})
	}
	org := models.Organization{ID: models.NewID(), Name: name, CreatedAt: time.Now().UTC()}
	return &org, s.DB.Conn(ctx).Create(&org).Error
}

// CreateUser creates the user (or finds it by email) and gives it role in the organization.
// The password is set only when the user is new.
func (s *Service) CreateUser(ctx context.Context, orgID, email, password, role string) (*models.User, error) {
	email = strings.ToLower(strings.TrimSpace(email))
	fields := map[string]string{}
	if a, err := mail.ParseAddress(email); err != nil || a.Address != email {
		fields["email"] = "must be an email address"
	}
	if len(password) < 8 {
		fields["password"] = "must be at least 8 characters"
	}
	if !validRole(role) {
		fields["role"] = "must be one of owner, admin, accountant, viewer"
	}
	if len(fields) > 0 {
		return nil, models.Invalid("Invalid user.", fields)
	}
	var user models.User
	err := s.DB.Tx(ctx, func(tx *gorm.DB) error {
		var org models.Organization
		if err := tx.First(&org, "id = ?", orgID).Error; err != nil {
			if models.IsNotFound(err) {
				return models.NotFound("organization")
			}
			return err
		}
		err := tx.Where("email = ?", email).First(&user).Error
		if models.IsNotFound(err) {
			hash, herr := argon2id.CreateHash(password, s.params())
			if herr != nil {
				return herr
			}
			user = models.User{ID: models.NewID(), Email: email, Name: strings.Split(email, "@")[0], PasswordHash: hash, CreatedAt: time.Now().UTC()}
			err = tx.Create(&user).Error
		}
		if err != nil {
			return err
		}
		var m models.Membership
		err = tx.Where("organization_id = ? AND user_id = ?", orgID, user.ID).First(&m).Error
		if err == nil {
			return tx.Model(&m).Update("role", role).Error
		}
		if !models.IsNotFound(err) {
			return err
		}
		return tx.Create(&models.Membership{ID: models.NewID(), OrganizationID: orgID, UserID: user.ID, Role: role, CreatedAt: time.Now().UTC()}).Error
	})
	if err != nil {
		return nil, err
	}
	return &user, nil
}

func (s *Service) params() *argon2id.Params {
	if s.Params != nil {
		return s.Params
	}
	return argon2id.DefaultParams
}

func validRole(r string) bool {
	for _, x := range models.Roles {
		if x == r {
			return true
		}
	}
	return false
}

// TokenPrefix starts every API token.
const TokenPrefix = "llt_"

// CreateToken creates an API token for the organization and returns it in plain text
// (the only time it is available).
func (s *Service) CreateToken(ctx context.Context, orgID, role, name string) (string, *models.APIToken, error) {
	if !validRole(role) {
		return "", nil, models.Invalid("Invalid token.", map[string]string{"role": "must be one of owner, admin, accountant, viewer"})
	}
	var org models.Organization
	if err := s.DB.Conn(ctx).First(&org, "id = ?", orgID).Error; err != nil {
		if models.IsNotFound(err) {
			return "", nil, models.NotFound("organization")
		}
		return "", nil, err
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", nil, err
	}
	plain := TokenPrefix + hex.EncodeToString(b)
	t := models.APIToken{ID: models.NewID(), OrganizationID: orgID, Name: name, Role: role, TokenHash: hashToken(plain), CreatedAt: time.Now().UTC()}
	if err := s.DB.Conn(ctx).Create(&t).Error; err != nil {
		return "", nil, err
	}
	return plain, &t, nil
}

func hashToken(plain string) string {
	h := sha256.Sum256([]byte(plain))
	return hex.EncodeToString(h[:])
}

var errBadCredentials = models.Errorf(models.EUNAUTHORIZED, "The email or password is not correct.")

// Login checks an email and password and returns the user's principal in its first
// organization (by membership age). EUNAUTHORIZED when they do not match.
func (s *Service) Login(ctx context.Context, email, password string) (*Principal, error) {
	var u models.User
	err := s.DB.Conn(ctx).Where("email = ?", strings.ToLower(strings.TrimSpace(email))).First(&u).Error
	if models.IsNotFound(err) {
		// Spend the same time as a real check, so timing does not reveal which emails exist.
		_, _ = argon2id.ComparePasswordAndHash(password, dummyHash)
		return nil, errBadCredentials
	}
	if err != nil {
		return nil, err
	}
	ok, err := argon2id.ComparePasswordAndHash(password, u.PasswordHash)
	if err != nil || !ok {
		return nil, errBadCredentials
	}
	return s.UserPrincipal(ctx, u.ID, "")
}

var dummyHash, _ = argon2id.CreateHash("lifeline-dummy-password", argon2id.DefaultParams)

// UserPrincipal returns the user's principal in orgID, or in its first organization when
// orgID is empty. EUNAUTHORIZED when the user has no such membership.
func (s *Service) UserPrincipal(ctx context.Context, userID, orgID string) (*Principal, error) {
	var row struct {
		OrganizationID string
		OrgName        string
		Role           string
		Email          string
	}
	q := s.DB.Conn(ctx).Table("memberships m").
		Select("m.organization_id, o.name AS org_name, m.role, u.email").
		Joins("JOIN organizations o ON o.id = m.organization_id").
		Joins("JOIN users u ON u.id = m.user_id").
		Where("m.user_id = ?", userID)
	if orgID != "" {
		q = q.Where("m.organization_id = ?", orgID)
	}
	if err := q.Order("m.created_at").Limit(1).Scan(&row).Error; err != nil {
		return nil, err
	}
	if row.OrganizationID == "" {
		return nil, models.Errorf(models.EUNAUTHORIZED, "You are not a member of this organization.")
	}
	return &Principal{OrganizationID: row.OrganizationID, OrgName: row.OrgName, Role: row.Role, UserID: userID, Email: row.Email}, nil
}

// TokenPrincipal returns the principal of a plain API token; EUNAUTHORIZED if unknown.
func (s *Service) TokenPrincipal(ctx context.Context, plain string) (*Principal, error) {
	if !strings.HasPrefix(plain, TokenPrefix) {
		return nil, models.Errorf(models.EUNAUTHORIZED, "Invalid API token.")
	}
	var t models.APIToken
	err := s.DB.Conn(ctx).Where("token_hash = ?", hashToken(plain)).First(&t).Error
	if models.IsNotFound(err) {
		return nil, models.Errorf(models.EUNAUTHORIZED, "Invalid API token.")
	}
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	if t.LastUsedAt == nil || now.Sub(*t.LastUsedAt) > time.Minute {
		s.DB.Conn(ctx).Model(&t).Update("last_used_at", now)
	}
	var org models.Organization
	if err := s.DB.Conn(ctx).First(&org, "id = ?", t.OrganizationID).Error; err != nil {
		return nil, err
	}
	return &Principal{OrganizationID: t.OrganizationID, OrgName: org.Name, Role: t.Role, TokenID: t.ID}, nil
}
