package credentials_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/models/modeltest"
	"lifeline/services/audit"
	"lifeline/services/credentials"
	"lifeline/services/redact"
	"lifeline/services/secrets"
)

func setup(t *testing.T, db *models.DB) (orgID, otherID string) {
	t.Helper()
	spec, err := secrets.NewKeySpec("test")
	if err != nil {
		t.Fatal(err)
	}
	ring, err := secrets.ParseRing(spec)
	if err != nil {
		t.Fatal(err)
	}
	db.Sealer = secrets.JSONSealer{Ring: ring, IsSecret: redact.New(nil).Match}
	for _, id := range []*string{&orgID, &otherID} {
		o := models.Organization{ID: models.NewID(), Name: "Biuro " + models.NewID()[:8], CreatedAt: time.Now().UTC()}
		if err := db.Conn(context.Background()).Create(&o).Error; err != nil {
			t.Fatal(err)
		}
		*id = o.ID
	}
	return orgID, otherID
}

// TestSaveReplaceDelete: a credential is added, then replaced by name (the same row, the new
// value, sealed at rest); another organization neither sees nor deletes it.
func TestSaveReplaceDelete(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		org, other := setup(t, db)
		svc := credentials.New(db, nil)
		admin := audit.Actor{Type: audit.ActorUser, ID: models.NewID()}
		c, created, err := svc.Save(ctx, org, admin, credentials.Input{Name: " ksefToken ", Value: " TOKEN-OLD-1234 "})
		if err != nil || !created || c.Name != "ksefToken" || c.Last4 != "1234" {
			t.Fatalf("save: %v %v %+v", err, created, c)
		}
		var raw string
		db.Conn(ctx).Raw("SELECT secret FROM credentials WHERE id = ?", c.ID).Scan(&raw)
		if strings.Contains(raw, "TOKEN-OLD") || !strings.Contains(raw, "enc:") {
			t.Errorf("stored %q", raw)
		}
		r, created, err := svc.Save(ctx, org, admin, credentials.Input{Name: "ksefToken", Value: "TOKEN-NEW-5678"})
		if err != nil || created || r.ID != c.ID || r.Last4 != "5678" {
			t.Fatalf("replace: %v %v %+v", err, created, r)
		}
		if v, _ := svc.Values(ctx, org); v["ksefToken"] != "TOKEN-NEW-5678" || len(v) != 1 {
			t.Errorf("values %v", v)
		}
		if v, _ := svc.Values(ctx, other); len(v) != 0 {
			t.Errorf("another organization reads %v", v)
		}
		if _, err := svc.Delete(ctx, other, c.ID, admin); apperr.ErrorCode(err) != apperr.ENOTFOUND {
			t.Errorf("another organization's delete: %v", err)
		}
		if _, err := svc.Delete(ctx, org, c.ID, admin); err != nil {
			t.Fatal(err)
		}
		if l, _ := svc.List(ctx, org); len(l) != 0 {
			t.Errorf("left %v", l)
		}
		var n int64
		db.Conn(ctx).Table("audit_log").Where("organization_id = ? AND entity_type = ?", org, "credential").Count(&n)
		if n != 3 {
			t.Errorf("%d audit rows, want 3", n)
		}
	})
}

// TestSaveRefusesBadInput: field messages, and nothing written.
func TestSaveRefusesBadInput(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		org, _ := setup(t, db)
		svc := credentials.New(db, nil)
		for _, in := range []credentials.Input{{Name: "", Value: "12345678"}, {Name: "1abc", Value: "12345678"}, {Name: "a.b", Value: "12345678"},
			{Name: "ok", Value: "short"}, {Name: "ok", Value: "line\nbreak-1234"}, {Name: "ok", Value: strings.Repeat("x", 4097)}} {
			_, _, err := svc.Save(ctx, org, audit.System, in)
			var me *apperr.Error
			if !asInvalid(err, &me) || len(me.Fields) != 1 {
				t.Errorf("%q: %v", in.Name, err)
			}
		}
		if l, _ := svc.List(ctx, org); len(l) != 0 {
			t.Errorf("written: %v", l)
		}
	})
}

func asInvalid(err error, me **apperr.Error) bool {
	e, ok := err.(*apperr.Error)
	*me = e
	return ok && e.Code == apperr.EINVALID
}

// TestReplaceCredentialIsGuarded: the guarded change wins only from the version it read; a
// second writer from the same version loses and changes nothing.
func TestReplaceCredentialIsGuarded(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		org, _ := setup(t, db)
		now := time.Now().UTC().Truncate(time.Microsecond)
		c := models.Credential{ID: models.NewID(), OrganizationID: org, Name: "bank", Value: "FIRST-VALUE-1", Last4: "UE-1", CreatedAt: now, UpdatedAt: now}
		if err := db.CreateCredential(db.Conn(ctx), &c); err != nil {
			t.Fatal(err)
		}
		read, err := db.CredentialByName(db.Conn(ctx), org, "bank")
		if err != nil {
			t.Fatal(err)
		}
		first := models.Credential{ID: c.ID, OrganizationID: org, Value: "SECOND-VALUE-2", Last4: "UE-2", UpdatedAt: now.Add(time.Second)}
		if won, err := db.ReplaceCredential(db.Conn(ctx), &first, read.UpdatedAt); err != nil || !won {
			t.Fatalf("first: %v %v", won, err)
		}
		second := models.Credential{ID: c.ID, OrganizationID: org, Value: "THIRD-VALUE-3", Last4: "UE-3", UpdatedAt: now.Add(2 * time.Second)}
		if won, err := db.ReplaceCredential(db.Conn(ctx), &second, read.UpdatedAt); err != nil || won {
			t.Fatalf("second from a stale read: %v %v", won, err)
		}
		got, err := db.GetCredential(ctx, org, c.ID)
		if err != nil || got.Value != "SECOND-VALUE-2" || got.Last4 != "UE-2" {
			t.Errorf("kept %+v %v", got, err)
		}
	})
}
