package outbound

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"code.dny.dev/ssrf"
)

func mustAllow(t *testing.T, s string) []netip.Prefix {
	t.Helper()
	p, err := ParseAllow(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// okServer is a loopback server counting the requests it receives.
func okServer(t *testing.T) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte("ok"))
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

func get(t *testing.T, c *http.Client, u string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if resp != nil {
		t.Cleanup(func() { _ = resp.Body.Close() })
	}
	return resp, err
}

func TestLoopbackDeniedWithoutAllow(t *testing.T) {
	t.Parallel()
	srv, hits := okServer(t)
	_, err := get(t, NewClient(Options{}), srv.URL)
	if !errors.Is(err, ErrDenied) {
		t.Fatalf("err = %v, want ErrDenied", err)
	}
	if !errors.Is(err, ssrf.ErrProhibitedIP) {
		t.Errorf("err = %v, want it to wrap ssrf.ErrProhibitedIP too", err)
	}
	if hits.Load() != 0 {
		t.Errorf("server was reached %d times", hits.Load())
	}
}

func TestLoopbackAllowed(t *testing.T) {
	t.Parallel()
	srv, hits := okServer(t)
	resp, err := get(t, NewClient(Options{Allow: mustAllow(t, "127.0.0.0/8")}), srv.URL)
	if err != nil {
		t.Fatalf("err = %v", err)
	}
	if resp.StatusCode != http.StatusOK || hits.Load() != 1 {
		t.Errorf("status %d, hits %d", resp.StatusCode, hits.Load())
	}
}

func TestLocalhostHostnameDenied(t *testing.T) {
	t.Parallel()
	srv, hits := okServer(t)
	u, _ := url.Parse(srv.URL)
	_, err := get(t, NewClient(Options{}), "http://localhost:"+u.Port()+"/")
	if !errors.Is(err, ErrDenied) {
		t.Fatalf("err = %v, want ErrDenied", err)
	}
	if hits.Load() != 0 {
		t.Errorf("server was reached %d times", hits.Load())
	}
}

func TestRedirectToDeniedAddress(t *testing.T) {
	t.Parallel()
	target, targetHits := okServer(t)
	tu, _ := url.Parse(target.URL)
	// Allowed: 127.0.0.1 only. The redirect goes to 127.0.0.2 (also
	// loopback on Linux), which must be refused at dial time.
	redirector := httptest.NewServer(http.RedirectHandler("http://127.0.0.2:"+tu.Port()+"/", http.StatusFound))
	t.Cleanup(redirector.Close)
	_, err := get(t, NewClient(Options{Allow: mustAllow(t, "127.0.0.1")}), redirector.URL)
	if !errors.Is(err, ErrDenied) {
		t.Fatalf("err = %v, want ErrDenied", err)
	}
	if targetHits.Load() != 0 {
		t.Errorf("target reached %d times", targetHits.Load())
	}
}

func TestMetadataDeniedEvenIfAllowed(t *testing.T) {
	t.Parallel()
	c := NewClient(Options{
		Allow:   mustAllow(t, "169.254.0.0/16, 100.64.0.0/10, 0.0.0.0/0"),
		Timeout: 3 * time.Second,
	})
	for _, u := range []string{
		"http://169.254.169.254/latest/meta-data/",
		"http://169.254.170.2/v2/credentials",
		"http://100.100.100.200/latest/meta-data/",
	} {
		start := time.Now()
		_, err := get(t, c, u)
		if !errors.Is(err, ErrDenied) {
			t.Errorf("%s: err = %v, want ErrDenied", u, err)
		}
		// The guard refuses before connecting, so no dial timeout elapses.
		if d := time.Since(start); d > time.Second {
			t.Errorf("%s: took %v, guard should refuse before connecting", u, d)
		}
	}
}

func TestControl(t *testing.T) {
	t.Parallel()
	tests := []struct {
		addr    string
		allow   string
		network string // tcp4 or tcp6 when empty
		ok      bool
	}{
		{addr: "93.184.215.14:443", ok: true},
		{addr: "93.184.215.14:8443", ok: true}, // any port
		{addr: "[2606:4700::1111]:80", ok: true},
		{addr: "127.0.0.1:80"},
		{addr: "127.0.0.1:80", allow: "127.0.0.0/8", ok: true},
		{addr: "[::1]:80"},
		{addr: "[::1]:80", allow: "::1", ok: true},
		{addr: "10.1.2.3:80"},
		{addr: "10.1.2.3:80", allow: "10.0.0.0/8", ok: true},
		{addr: "172.16.5.4:80"},
		{addr: "192.168.1.1:80"},
		{addr: "100.64.0.1:80"},
		{addr: "100.64.0.1:80", allow: "100.64.0.0/10", ok: true},
		{addr: "[fd12::1]:80"},
		{addr: "[fd12::1]:80", allow: "fc00::/7", ok: true},
		{addr: "0.0.0.0:80"},
		{addr: "224.0.0.1:80"},
		{addr: "[::ffff:127.0.0.1]:80"},
		{addr: "[::ffff:127.0.0.1]:80", allow: "127.0.0.1", ok: true},
		// Never allowed.
		{addr: "169.254.169.254:80", allow: "169.254.0.0/16"},
		{addr: "169.254.169.254:80", allow: "0.0.0.0/0"},
		{addr: "169.254.1.1:80", allow: "169.254.1.1"},
		{addr: "100.100.100.200:80", allow: "100.64.0.0/10"},
		{addr: "[fd00:ec2::254]:80", allow: "fc00::/7"},
		{addr: "[fe80::1]:80", allow: "fe80::/10"},
		{addr: "[fe80::1%eth0]:80", allow: "::/0"},
		{addr: "[::ffff:169.254.169.254]:80", allow: "::/0, 0.0.0.0/0"},
		{addr: "[64:ff9b::a9fe:a9fe]:80", allow: "64:ff9b::/96"}, // NAT64 169.254.169.254
		{addr: "[64:ff9b::808:808]:80", allow: "64:ff9b::/96", ok: true},
		// Only TCP.
		{addr: "93.184.215.14:53", network: "udp4"},
		{addr: "not-an-address"},
	}
	for _, tt := range tests {
		name := tt.addr + " allow=" + tt.allow + " " + tt.network
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			network := tt.network
			if network == "" {
				network = "tcp4"
				if strings.HasPrefix(tt.addr, "[") {
					network = "tcp6"
				}
			}
			err := newGuard(mustAllow(t, tt.allow)).control(network, tt.addr, nil)
			if tt.ok && err != nil {
				t.Errorf("control = %v, want allowed", err)
			}
			if !tt.ok && !errors.Is(err, ErrDenied) {
				t.Errorf("control = %v, want ErrDenied", err)
			}
		})
	}
}

func TestParseAllow(t *testing.T) {
	t.Parallel()
	pfx := netip.MustParsePrefix
	tests := []struct {
		in      string
		want    []netip.Prefix
		wantErr string // substring naming the bad entry
	}{
		{in: "", want: nil},
		{in: "  ", want: nil},
		{in: "127.0.0.0/8", want: []netip.Prefix{pfx("127.0.0.0/8")}},
		{in: " 10.0.0.0/8 , 192.168.1.7,::1 ,fd00::/8,", want: []netip.Prefix{
			pfx("10.0.0.0/8"), pfx("192.168.1.7/32"), pfx("::1/128"), pfx("fd00::/8"),
		}},
		{in: "10.1.2.3/8", want: []netip.Prefix{pfx("10.0.0.0/8")}},
		{in: "::ffff:10.0.0.1", want: []netip.Prefix{pfx("10.0.0.1/32")}},
		{in: "::ffff:10.0.0.0/104", want: []netip.Prefix{pfx("10.0.0.0/8")}},
		{in: "10.0.0.0/8, nope", wantErr: `"nope"`},
		{in: "10.0.0.0/33", wantErr: `"10.0.0.0/33"`},
		{in: "300.1.1.1", wantErr: `"300.1.1.1"`},
		{in: "example.com", wantErr: `"example.com"`},
		{in: "fe80::1%eth0", wantErr: `"fe80::1%eth0"`},
		{in: "10.0.0.0 /8", wantErr: `"10.0.0.0 /8"`},
	}
	for _, tt := range tests {
		got, err := ParseAllow(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseAllow(%q) err = %v, want one naming %s", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseAllow(%q): %v", tt.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseAllow(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestOnlyHTTPSchemes(t *testing.T) {
	t.Parallel()
	c := NewClient(Options{Allow: mustAllow(t, "127.0.0.0/8")})
	for _, u := range []string{"ftp://127.0.0.1/x", "file:///etc/passwd", "gopher://127.0.0.1/"} {
		if _, err := get(t, c, u); err == nil {
			t.Errorf("%s: want error", u)
		}
	}
}

func TestTimeoutDefault(t *testing.T) {
	t.Parallel()
	if got := NewClient(Options{}).Timeout; got != DefaultTimeout {
		t.Errorf("default timeout = %v", got)
	}
	if got := NewClient(Options{Timeout: time.Second}).Timeout; got != time.Second {
		t.Errorf("timeout = %v", got)
	}
}

// TestProxyEnvIgnored is not parallel: it sets HTTP_PROXY. With a proxy the
// request to a documentation address would go to the (allowed, loopback)
// proxy and succeed; without one the guard refuses the real destination.
func TestProxyEnvIgnored(t *testing.T) {
	proxy, proxyHits := okServer(t)
	t.Setenv("HTTP_PROXY", proxy.URL)
	t.Setenv("http_proxy", proxy.URL)
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")

	c := NewClient(Options{Allow: mustAllow(t, "127.0.0.0/8"), Timeout: 3 * time.Second})
	if tr, ok := c.Transport.(*http.Transport); !ok || tr.Proxy != nil {
		t.Fatalf("Transport = %T with Proxy set; want *http.Transport with Proxy nil", c.Transport)
	}

	const target = "http://192.0.2.10/"
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, target, nil)
	if p, _ := http.ProxyFromEnvironment(req); p == nil {
		t.Log("ProxyFromEnvironment cached an earlier environment; only the behavioural check below applies")
	}
	_, err := get(t, c, target)
	if !errors.Is(err, ErrDenied) {
		t.Errorf("err = %v, want ErrDenied for the real destination", err)
	}
	if proxyHits.Load() != 0 {
		t.Errorf("proxy was used %d times", proxyHits.Load())
	}
}
