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
	"runtime"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/alexedwards/argon2id"
	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/audit"
)

// Service is the auth service.
type Service struct {
	DB *models.DB
	// Params are the argon2id parameters for new hashes (OWASPParams when nil). Stored
	// hashes carry their own parameters and verify whatever they are.
	Params *argon2id.Params
	// Now is the clock of token expiry (time.Now when nil).
	Now func() time.Time

	once      sync.Once
	slots     chan struct{} // at most NumCPU password hashes at a time
	dummyOnce sync.Once
	dummy     string // a hash to compare against for unknown emails (same cost)
}

// OWASPParams are OWASP's argon2id parameters: 19 MiB, 2 iterations, 1 lane.
var OWASPParams = &argon2id.Params{Memory: 19 * 1024, Iterations: 2, Parallelism: 1, SaltLength: 16, KeyLength: 32}

// DefaultTokenTTL is how long a new API token is valid unless another expiry is asked for.
const DefaultTokenTTL = 90 * 24 * time.Hour

func (s *Service) init() {
	s.once.Do(func() { s.slots = make(chan struct{}, runtime.NumCPU()) })
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

// hashing runs fn while holding one of NumCPU hashing slots: each hash takes its memory
// (19 MiB), so concurrent logins cannot take the server's memory.
func (s *Service) hashing(ctx context.Context, fn func()) error {
	s.init()
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.slots }()
	fn()
	return nil
}

// dummyHash is made on first use with the service's parameters, so a login with an unknown
// email costs what a real one does (and start-up costs nothing).
func (s *Service) dummyHash() string {
	s.dummyOnce.Do(func() { s.dummy, _ = argon2id.CreateHash("lifeline-dummy-password", s.params()) })
	return s.dummy
}

// Principal is who is acting within one organization.
type Principal struct {
	OrganizationID string
	OrgName        string
	Role           string
	UserID         string // empty for API tokens
	Email          string
	TokenID        string // empty for users
	// Language and TimeZone are the user's own choice (empty: none); OrgLanguage and
	// OrgTimeZone the organization's defaults (empty: none).
	Language, TimeZone       string
	OrgLanguage, OrgTimeZone string
}

// Can reports whether the principal's role is at least min.
func (p *Principal) Can(min string) bool { return p != nil && models.RoleAtLeast(p.Role, min) }

// CreateOrg creates an organization.
func (s *Service) CreateOrg(ctx context.Context, name string) (*models.Organization, error) {
	name = strings.TrimSpace(name)
	if name == "" || len(name) > 200 {
		return nil, apperr.Invalid("Invalid organization.", map[string]string{"name": "is required, at most 200 characters"})
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
		return nil, apperr.Invalid("Invalid user.", fields)
	}
	var user models.User
	err := s.DB.Tx(ctx, func(tx *gorm.DB) error {
		var org models.Organization
		if err := tx.First(&org, "id = ?", orgID).Error; err != nil {
			if models.IsNotFound(err) {
				return apperr.NotFound("organization")
			}
			return err
		}
		err := tx.Where("email = ?", email).First(&user).Error
		if models.IsNotFound(err) {
			var hash string
			var herr error
			if werr := s.hashing(ctx, func() { hash, herr = argon2id.CreateHash(password, s.params()) }); werr != nil {
				return werr
			}
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
	return OWASPParams
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

// CreateToken creates an API token for the organization valid for DefaultTokenTTL and
// returns it in plain text (the only time it is available).
func (s *Service) CreateToken(ctx context.Context, orgID, role, name string) (string, *models.APIToken, error) {
	return s.IssueToken(ctx, TokenRequest{OrganizationID: orgID, Role: role, Name: name, TTL: DefaultTokenTTL, Actor: audit.System})
}

// TokenRequest asks for a new API token.
type TokenRequest struct {
	OrganizationID string
	Role           string
	Name           string
	// TTL is how long the token is valid; 0 means it never expires.
	TTL time.Duration
	// MaxRole, when set, is the highest role the token may have (an admin cannot mint an
	// owner token).
	MaxRole string
	Actor   audit.Actor
}

// IssueToken creates an API token and returns it in plain text (the only time it is
// available). Errors: EINVALID for a bad role, name or expiry; ENOTFOUND for a missing
// organization. The audit log records token.created.
func (s *Service) IssueToken(ctx context.Context, r TokenRequest) (string, *models.APIToken, error) {
	fields := map[string]string{}
	if !validRole(r.Role) {
		fields["role"] = "must be one of owner, admin, accountant, viewer"
	} else if r.MaxRole != "" && !models.RoleAtLeast(r.MaxRole, r.Role) {
		fields["role"] = "cannot be above your own role (" + r.MaxRole + ")"
	}
	r.Name = strings.TrimSpace(r.Name)
	if len(r.Name) > 200 || !printable(r.Name) {
		fields["name"] = "must be at most 200 printable characters"
	}
	if r.TTL < 0 || r.TTL > 5*365*24*time.Hour {
		fields["expires"] = "must be between 1 day and 5 years, or never"
	}
	if len(fields) > 0 {
		return "", nil, apperr.Invalid("Invalid token.", fields)
	}
	var org models.Organization
	if err := s.DB.Conn(ctx).First(&org, "id = ?", r.OrganizationID).Error; err != nil {
		if models.IsNotFound(err) {
			return "", nil, apperr.NotFound("organization")
		}
		return "", nil, err
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", nil, err
	}
	plain := TokenPrefix + hex.EncodeToString(b)
	now := s.now()
	t := models.APIToken{ID: models.NewID(), OrganizationID: r.OrganizationID, Name: r.Name, Role: r.Role, TokenHash: hashToken(plain), CreatedAt: now}
	if r.TTL > 0 {
		exp := now.Add(r.TTL)
		t.ExpiresAt = &exp
	}
	err := s.DB.Tx(ctx, func(tx *gorm.DB) error {
		if err := tx.Create(&t).Error; err != nil {
			return err
		}
		details := map[string]any{"name": t.Name, "role": t.Role}
		if t.ExpiresAt != nil {
			details["expiresAt"] = t.ExpiresAt.Format(time.RFC3339)
		}
		return audit.Record(tx, audit.Entry{OrganizationID: t.OrganizationID, Actor: r.Actor, Action: "token.created",
			EntityType: "api_token", EntityID: t.ID, At: now, Details: details})
	})
	if err != nil {
		return "", nil, err
	}
	return plain, &t, nil
}

// Tokens lists the organization's API tokens, newest first.
func (s *Service) Tokens(ctx context.Context, orgID string) ([]models.APIToken, error) {
	var out []models.APIToken
	err := s.DB.Conn(ctx).Where("organization_id = ?", orgID).Order("created_at DESC, id").Find(&out).Error
	return out, err
}

// RevokeToken revokes a token of the organization (ENOTFOUND for another organization's);
// revoking a revoked token changes nothing. The audit log records token.revoked.
func (s *Service) RevokeToken(ctx context.Context, orgID, id string, actor audit.Actor) (*models.APIToken, error) {
	var t models.APIToken
	err := s.DB.Tx(ctx, func(tx *gorm.DB) error {
		if err := tx.Where("organization_id = ? AND id = ?", orgID, id).First(&t).Error; err != nil {
			if models.IsNotFound(err) {
				return apperr.NotFound("API token")
			}
			return err
		}
		if t.RevokedAt != nil {
			return nil
		}
		now := s.now()
		t.RevokedAt = &now
		if err := tx.Model(&t).Update("revoked_at", now).Error; err != nil {
			return err
		}
		return audit.Record(tx, audit.Entry{OrganizationID: orgID, Actor: actor, Action: "token.revoked",
			EntityType: "api_token", EntityID: t.ID, At: now, Details: map[string]any{"name": t.Name, "role": t.Role}})
	})
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// RevokePlainToken revokes the token with this plain value (ENOTFOUND if unknown).
func (s *Service) RevokePlainToken(ctx context.Context, plain string) (*models.APIToken, error) {
	var t models.APIToken
	if err := s.DB.Conn(ctx).Where("token_hash = ?", hashToken(strings.TrimSpace(plain))).First(&t).Error; err != nil {
		if models.IsNotFound(err) {
			return nil, apperr.NotFound("API token")
		}
		return nil, err
	}
	return s.RevokeToken(ctx, t.OrganizationID, t.ID, audit.System)
}

func printable(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError {
			return false
		}
	}
	return true
}

func hashToken(plain string) string {
	h := sha256.Sum256([]byte(plain))
	return hex.EncodeToString(h[:])
}

var errBadCredentials = apperr.Errorf(apperr.EUNAUTHORIZED, "auth.badcredentials")

// Login checks an email and password and returns the user's principal in its first
// organization (by membership age). EUNAUTHORIZED when they do not match.
func (s *Service) Login(ctx context.Context, email, password string) (*Principal, error) {
	email = strings.ToLower(strings.TrimSpace(email))
	var u models.User
	var err error = gorm.ErrRecordNotFound
	// An email no user can have (NUL, invalid UTF-8, too long) is not looked up: PostgreSQL
	// would refuse it, and the answer must be the same on every database.
	if len(email) <= 320 && utf8.ValidString(email) && printable(email) {
		err = s.DB.Conn(ctx).Where("email = ?", email).First(&u).Error
	}
	if models.IsNotFound(err) {
		// Spend the same time as a real check, so timing does not reveal which emails exist.
		hash := s.dummyHash()
		if werr := s.hashing(ctx, func() { _, _ = argon2id.ComparePasswordAndHash(password, hash) }); werr != nil {
			return nil, werr
		}
		return nil, errBadCredentials
	}
	if err != nil {
		return nil, err
	}
	var ok bool
	if werr := s.hashing(ctx, func() { ok, err = argon2id.ComparePasswordAndHash(password, u.PasswordHash) }); werr != nil {
		return nil, werr
	}
	if err != nil || !ok {
		return nil, errBadCredentials
	}
	return s.UserPrincipal(ctx, u.ID, "")
}

// UserPrincipal returns the user's principal in orgID, or in its first organization when
// orgID is empty. EUNAUTHORIZED when the user has no such membership.
func (s *Service) UserPrincipal(ctx context.Context, userID, orgID string) (*Principal, error) {
	var row struct {
		OrganizationID string
		OrgName        string
		Role           string
		Email          string
		Language       *string
		TimeZone       *string
		OrgLanguage    *string
		OrgTimeZone    *string
	}
	q := s.DB.Conn(ctx).Table("memberships m").
		Select("m.organization_id, o.name AS org_name, m.role, u.email, u.language, u.time_zone, o.default_language AS org_language, o.time_zone AS org_time_zone").
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
		return nil, apperr.Errorf(apperr.EUNAUTHORIZED, "auth.notmember")
	}
	return &Principal{OrganizationID: row.OrganizationID, OrgName: row.OrgName, Role: row.Role, UserID: userID, Email: row.Email,
		Language: deref(row.Language), TimeZone: deref(row.TimeZone), OrgLanguage: deref(row.OrgLanguage), OrgTimeZone: deref(row.OrgTimeZone)}, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// SetUserLocale saves a user's language ("pl", "en"; empty: the organization's) and time
// zone (an IANA name such as Europe/Warsaw; empty: the organization's). EINVALID otherwise.
func (s *Service) SetUserLocale(ctx context.Context, userID, language, timeZone string, supported func(string) bool) error {
	if err := checkLocale(language, timeZone, supported); err != nil {
		return err
	}
	return s.DB.Conn(ctx).Model(&models.User{}).Where("id = ?", userID).
		Updates(map[string]any{"language": nullIfEmpty(language), "time_zone": nullIfEmpty(timeZone)}).Error
}

// SetOrgLocale saves an organization's default language and time zone for members who
// chose none (empty: none). EINVALID otherwise.
func (s *Service) SetOrgLocale(ctx context.Context, orgID, language, timeZone string, supported func(string) bool, actor audit.Actor) error {
	if err := checkLocale(language, timeZone, supported); err != nil {
		return err
	}
	return s.DB.Tx(ctx, func(tx *gorm.DB) error {
		if err := tx.Model(&models.Organization{}).Where("id = ?", orgID).
			Updates(map[string]any{"default_language": nullIfEmpty(language), "time_zone": nullIfEmpty(timeZone)}).Error; err != nil {
			return err
		}
		return audit.Record(tx, audit.Entry{OrganizationID: orgID, Actor: actor, Action: "organization.updated", EntityType: "organization",
			EntityID: orgID, Details: map[string]any{"defaultLanguage": language, "timeZone": timeZone}})
	})
}

// checkLocale validates a language ("" or supported) and an IANA time zone ("" or known).
func checkLocale(language, timeZone string, supported func(string) bool) error {
	fields := map[string]string{}
	if language != "" && !supported(language) {
		fields["language"] = "language.unsupported"
	}
	if timeZone != "" {
		if _, err := time.LoadLocation(timeZone); err != nil || timeZone == "Local" {
			fields["timeZone"] = "timezone.unknown"
		}
	}
	if len(fields) > 0 {
		return apperr.Invalid("locale.invalid", fields)
	}
	return nil
}

func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// TokenPrincipal returns the principal of a plain API token; EUNAUTHORIZED if unknown.
func (s *Service) TokenPrincipal(ctx context.Context, plain string) (*Principal, error) {
	if !strings.HasPrefix(plain, TokenPrefix) {
		return nil, apperr.Errorf(apperr.EUNAUTHORIZED, "Invalid API token.")
	}
	var t models.APIToken
	err := s.DB.Conn(ctx).Where("token_hash = ?", hashToken(plain)).First(&t).Error
	if models.IsNotFound(err) {
		return nil, apperr.Errorf(apperr.EUNAUTHORIZED, "Invalid API token.")
	}
	if err != nil {
		return nil, err
	}
	now := s.now()
	switch {
	case t.RevokedAt != nil:
		return nil, apperr.Errorf(apperr.EUNAUTHORIZED, "This API token was revoked on %s; ask an admin for a new one.", t.RevokedAt.UTC().Format("2006-01-02 15:04 UTC"))
	case t.ExpiresAt != nil && !now.Before(*t.ExpiresAt):
		return nil, apperr.Errorf(apperr.EUNAUTHORIZED, "This API token expired on %s; ask an admin for a new one.", t.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC"))
	}
	if t.LastUsedAt == nil || now.Sub(*t.LastUsedAt) > time.Minute {
		s.DB.Conn(ctx).Model(&t).Update("last_used_at", now)
	}
	var org models.Organization
	if err := s.DB.Conn(ctx).First(&org, "id = ?", t.OrganizationID).Error; err != nil {
		return nil, err
	}
	return &Principal{OrganizationID: t.OrganizationID, OrgName: org.Name, Role: t.Role, TokenID: t.ID,
		OrgLanguage: deref(org.DefaultLanguage), OrgTimeZone: deref(org.TimeZone)}, nil
}
