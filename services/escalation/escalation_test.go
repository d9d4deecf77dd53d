package escalation

import (
	"testing"
	"time"

	"lifeline/models"
)

func TestValidate(t *testing.T) {
	ms := []models.RoleMember{{UserID: "u1", Email: "Anna@biuro.example", Role: models.RoleAccountant}}
	h := time.Hour.Milliseconds()
	for _, c := range []struct {
		name   string
		levels []Level
		fields []string // keys expected
		to     [][]string
	}{
		{"empty", nil, nil, nil},
		{"normalized", []Level{{h, []string{"admin", "role:admin", "anna@BIURO.example"}}, {2 * h, []string{"u1", "role:owner"}}}, nil,
			[][]string{{"role:admin", "Anna@biuro.example"}, {"u1", "role:owner"}}},
		{"zero", []Level{{0, []string{"role:admin"}}}, []string{"levels[0].afterMs"}, nil},
		{"not increasing", []Level{{h, []string{"role:admin"}}, {h, []string{"role:owner"}}}, []string{"levels[1].afterMs"}, nil},
		{"too long", []Level{{MaxAfter.Milliseconds() + 1, []string{"role:admin"}}}, []string{"levels[0].afterMs"}, nil},
		{"nobody", []Level{{h, nil}}, []string{"levels[0].to"}, nil},
		{"viewer and stranger", []Level{{h, []string{"role:viewer", "x@y.z"}}}, []string{"levels[0].to", "levels[0].to[0]", "levels[0].to[1]"}, nil},
	} {
		out, fields := Validate(c.levels, ms)
		if len(fields) != len(c.fields) {
			t.Errorf("%s: fields %v, want %v", c.name, fields, c.fields)
		}
		for _, k := range c.fields {
			if fields[k] == "" {
				t.Errorf("%s: no message on %s (%v)", c.name, k, fields)
			}
		}
		for i, to := range c.to {
			if len(out[i].To) != len(to) {
				t.Fatalf("%s: level %d to %v, want %v", c.name, i, out[i].To, to)
			}
			for j := range to {
				if out[i].To[j] != to[j] {
					t.Errorf("%s: level %d to %v, want %v", c.name, i, out[i].To, to)
				}
			}
		}
	}
	if _, f := Validate(make([]Level, MaxLevels+1), ms); f["levels"] == "" {
		t.Errorf("too many levels: %v", f)
	}
}

func TestReachedAndMatches(t *testing.T) {
	p := Policy{Levels: []Level{{time.Hour.Milliseconds(), []string{"role:admin"}}, {(4 * time.Hour).Milliseconds(), []string{"a@b.c"}}}}
	for d, want := range map[time.Duration]int{0: 0, 59 * time.Minute: 0, time.Hour: 1, 3 * time.Hour: 1, 4 * time.Hour: 2, 100 * time.Hour: 2} {
		if got := p.Reached(d); got != want {
			t.Errorf("Reached(%s) = %d, want %d", d, got, want)
		}
	}
	owner := models.RoleMember{UserID: "o", Email: "o@b.c", Role: models.RoleOwner}
	acc := models.RoleMember{UserID: "a", Email: "A@B.C", Role: models.RoleAccountant}
	if !Matches(owner, p.Levels[0].To) || Matches(acc, p.Levels[0].To) || !Matches(acc, p.Levels[1].To) || Matches(owner, p.Levels[1].To) {
		t.Error("Matches: role:admin includes owners; an email matches in any case; nothing else")
	}
}
