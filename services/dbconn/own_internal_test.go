package dbconn

import (
	"context"
	"net/netip"
	"testing"
)

func TestReachesOwn(t *testing.T) {
	t.Parallel()
	ap := netip.MustParseAddrPort
	lan := netip.MustParseAddr("192.168.1.20")
	local := []netip.Addr{netip.MustParseAddr("127.0.0.1"), lan, netip.MustParseAddr("fd12::20")}
	ownLocal := []netip.AddrPort{ap("127.0.0.1:5432"), ap("[::]:8080")}
	ownRemote := []netip.AddrPort{ap("10.0.0.7:5432")}
	for _, c := range []struct {
		name string
		own  []netip.AddrPort
		to   string
		want bool
	}{
		{"the own address", ownLocal, "127.0.0.1:5432", true},
		{"another loopback address", ownLocal, "127.0.0.2:5432", true},
		{"the end of 127/8", ownLocal, "127.255.255.254:5432", true},
		{"IPv6 loopback", ownLocal, "[::1]:5432", true},
		{"IPv4-mapped loopback", ownLocal, "[::ffff:127.0.0.1]:5432", true},
		{"unspecified IPv4", ownLocal, "0.0.0.0:5432", true},
		{"unspecified IPv6", ownLocal, "[::]:5432", true},
		{"the LAN address", ownLocal, "192.168.1.20:5432", true},
		{"an IPv6 interface address", ownLocal, "[fd12::20]:5432", true},
		{"the listen port on any local address", ownLocal, "192.168.1.20:8080", true},
		{"the listen port on loopback", ownLocal, "127.0.0.1:8080", true},
		{"another port", ownLocal, "127.0.0.1:5433", false},
		{"another machine", ownLocal, "192.168.1.21:5432", false},
		{"a public address", ownLocal, "203.0.113.9:5432", false},
		{"a remote own server", ownRemote, "10.0.0.7:5432", true},
		{"a remote own server, mapped", ownRemote, "[::ffff:10.0.0.7]:5432", true},
		{"a remote own server's port here", ownRemote, "127.0.0.1:5432", false},
		{"next to a remote own server", ownRemote, "10.0.0.8:5432", false},
		{"a remote own server, another port", ownRemote, "10.0.0.7:6432", false},
		{"no own servers", nil, "127.0.0.1:5432", false},
	} {
		if got := reachesOwn(c.own, local, ap(c.to)); got != c.want {
			t.Errorf("%s: reachesOwn(%s) = %v, want %v", c.name, c.to, got, c.want)
		}
	}
}

func TestOwnAddrs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := &own{servers: []string{"localhost:5432", ":8080", "10.0.0.7:6432"}, seen: map[string][]netip.AddrPort{}}
	got, err := o.addrs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[netip.AddrPort]bool{netip.MustParseAddrPort("127.0.0.1:5432"): true, netip.MustParseAddrPort("0.0.0.0:8080"): true,
		netip.MustParseAddrPort("[::]:8080"): true, netip.MustParseAddrPort("10.0.0.7:6432"): true}
	for _, a := range got {
		delete(want, a)
	}
	if len(want) != 0 {
		t.Errorf("addrs %v lack %v", got, want)
	}
	// A host that never resolved: no address can be checked, every dial is refused.
	never := &own{servers: []string{"lifeline-db.invalid:5432"}, seen: map[string][]netip.AddrPort{}}
	if _, err := never.addrs(ctx); err == nil {
		t.Errorf("an own server that does not resolve")
	}
	// One that resolved before keeps its addresses when it does not resolve now.
	never.seen["lifeline-db.invalid:5432"] = []netip.AddrPort{netip.MustParseAddrPort("10.1.1.1:5432")}
	if got, err := never.addrs(ctx); err != nil || len(got) != 1 {
		t.Errorf("remembered: %v %v", got, err)
	}
}

func TestSQLSTATEText(t *testing.T) {
	t.Parallel()
	for code, want := range map[string]string{
		"22P02":             "22P02 invalid_text_representation",
		"00000":             "00000 successful_completion",
		"01004":             "01004 string_data_right_truncation",
		"08006":             "08006 connection_failure",
		"0A000":             "0A000 feature_not_supported",
		"22001":             "22001 string_data_right_truncation",
		"22008":             "22008 datetime_field_overflow",
		"22012":             "22012 division_by_zero",
		"23505":             "23505 unique_violation",
		"28P01":             "28P01 invalid_password",
		"3D000":             "3D000 invalid_catalog_name",
		"40001":             "40001 serialization_failure",
		"40P01":             "40P01 deadlock_detected",
		"42501":             "42501 insufficient_privilege",
		"42601":             "42601 syntax_error",
		"42703":             "42703 undefined_column",
		"42P01":             "42P01 undefined_table",
		"53300":             "53300 too_many_connections",
		"57014":             "57014 query_canceled",
		"57P01":             "57P01 admin_shutdown",
		"58P01":             "58P01 undefined_file",
		"72000":             "72000 snapshot_too_old",
		"F0000":             "F0000 config_file_error",
		"HV00N":             "HV00N fdw_unable_to_establish_connection",
		"P0001":             "P0001 raise_exception",
		"XX000":             "XX000 internal_error",
		"XX002":             "XX002 index_corrupted",
		"22ZZZ":             "22ZZZ (class Data Exception)",
		"42ZZ1":             "42ZZ1 (class Syntax Error or Access Rule Violation)",
		"ZZ999":             "ZZ999 (unknown class)",
		"":                  "an invalid SQLSTATE",
		"2201":              "an invalid SQLSTATE",
		"22p02":             "an invalid SQLSTATE",
		"admin@example.com": "an invalid SQLSTATE",
	} {
		if got := sqlstateText(code); got != want {
			t.Errorf("sqlstateText(%q) = %q, want %q", code, got, want)
		}
	}
	// The whole of Appendix A: every class, every code named, every name snake_case.
	if len(sqlstateNames) < 260 || len(sqlstateClasses) < 43 {
		t.Errorf("%d codes in %d classes", len(sqlstateNames), len(sqlstateClasses))
	}
	for code, name := range sqlstateNames {
		if !validSQLSTATE(code) || sqlstateClasses[code[:2]] == "" || name == "" {
			t.Errorf("%s %q", code, name)
		}
		for _, r := range name {
			if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '_' {
				t.Errorf("%s: name %q", code, name)
				break
			}
		}
	}
}
