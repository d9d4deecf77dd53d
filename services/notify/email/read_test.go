package email_test

import (
	"context"
	"strings"
	"testing"

	"lifeline/services/notify"
	"lifeline/services/notify/email"
)

func TestReadWhatTheSinkReceived(t *testing.T) {
	sink, err := email.StartSink("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	s := email.New(sink.Config("Lifeline <alerts@biuro.example>"))
	text := "Przyczyna: NIP musi mieć 10 cyfr.\n" + strings.Repeat("Zażółć gęślą jaźń. ", 10) + "\nhttps://lifeline.example/executions/01a2"
	err = s.Send(context.Background(), notify.Message{Channel: notify.Email, To: "ksiegowa@biuro.example", Lang: "pl",
		Title: "Wykonanie przepływu „Deklaracja VAT” trafiło do kolejki DLQ", Text: text, HTML: "<p>HTML</p>", DedupKey: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	msgs := sink.Messages()
	if len(msgs) != 1 {
		t.Fatalf("%d messages", len(msgs))
	}
	r := msgs[0].Read()
	if r.Subject != "Wykonanie przepływu „Deklaracja VAT” trafiło do kolejki DLQ" || r.To != "ksiegowa@biuro.example" || r.Lang != "pl" ||
		r.Date.IsZero() || strings.TrimSpace(r.Text) != text {
		t.Errorf("read %+v", r)
	}
}
