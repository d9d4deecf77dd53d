package email

import (
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// Received is a message a Sink accepted.
type Received struct {
	From string
	To   []string
	Data []byte
	// User is the user that authenticated ("" without AUTH).
	User string
}

// Sink is a local SMTP server that keeps what it receives in memory (the demo's mailbox,
// and tests): plain SMTP, AUTH PLAIN accepted with any password unless Users is set, or
// with Users' password; RejectRcpt refuses a recipient permanently (550).
type Sink struct {
	// Users, when set, are the accepted user names and passwords.
	Users map[string]string
	// RejectRcpt, when set, refuses the recipients it returns true for with 550.
	RejectRcpt func(to string) bool
	// Max bounds the kept messages (the oldest go first; default 1000).
	Max int

	srv  *smtp.Server
	l    net.Listener
	addr string
	mu   sync.Mutex
	msgs []Received
	done chan error
}

// StartSink listens on addr ("127.0.0.1:2525", or ":0" style for a free port) and serves
// until Close.
func StartSink(addr string, s *Sink) (*Sink, error) {
	if s == nil {
		s = &Sink{}
	}
	if s.Max <= 0 {
		s.Max = 1000
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s.addr, s.l = l.Addr().String(), l
	s.srv = smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return &sinkSession{sink: s}, nil }))
	s.srv.Domain = "localhost"
	s.srv.AllowInsecureAuth = true
	s.srv.MaxMessageBytes = 10 << 20
	s.done = make(chan error, 1)
	go func() { s.done <- s.srv.Serve(l) }()
	return s, nil
}

// Addr is the address the sink listens on.
func (s *Sink) Addr() string { return s.addr }

// Config is how a Sender reaches this sink (plain SMTP), sending as from.
func (s *Sink) Config(from string) Config {
	host, port, _ := net.SplitHostPort(s.addr)
	p, _ := strconv.Atoi(port)
	return Config{Host: host, Port: p, TLS: TLSNone, From: from}
}

// Close stops the server and waits for it. It closes the listener itself too: a Close that
// comes before the serving goroutine has handed the listener to the server (a test that ends
// at once) would otherwise wait for an Accept that never returns.
func (s *Sink) Close() error {
	err := s.srv.Close()
	_ = s.l.Close() // already closed by the server, or not yet given to it
	if errors.Is(err, smtp.ErrServerClosed) {
		err = nil
	}
	if serr := <-s.done; serr != nil && !errors.Is(serr, smtp.ErrServerClosed) && !errors.Is(serr, net.ErrClosed) {
		return serr
	}
	return err
}

// Messages returns what the sink received, oldest first.
func (s *Sink) Messages() []Received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Received(nil), s.msgs...)
}

func (s *Sink) add(m Received) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.msgs = append(s.msgs, m)
	if len(s.msgs) > s.Max {
		s.msgs = s.msgs[len(s.msgs)-s.Max:]
	}
}

type sinkSession struct {
	sink *Sink
	user string
	cur  Received
}

func (ss *sinkSession) AuthMechanisms() []string { return []string{sasl.Plain} }

func (ss *sinkSession) Auth(mech string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(identity, username, password string) error {
		if ss.sink.Users != nil && (ss.sink.Users[username] == "" || ss.sink.Users[username] != password) {
			return errors.New("invalid username or password")
		}
		ss.user = username
		return nil
	}), nil
}

func (ss *sinkSession) Mail(from string, _ *smtp.MailOptions) error {
	if ss.sink.Users != nil && ss.user == "" {
		return smtp.ErrAuthRequired
	}
	ss.cur = Received{From: from, User: ss.user}
	return nil
}

func (ss *sinkSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	if ss.sink.RejectRcpt != nil && ss.sink.RejectRcpt(to) {
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such user: " + strings.ToLower(to)}
	}
	ss.cur.To = append(ss.cur.To, to)
	return nil
}

func (ss *sinkSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	ss.cur.Data = b
	ss.sink.add(ss.cur)
	return nil
}

func (ss *sinkSession) Reset()        { ss.cur = Received{} }
func (ss *sinkSession) Logout() error { return nil }
