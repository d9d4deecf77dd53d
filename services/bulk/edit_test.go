package bulk_test

import (
	"encoding/json"
	"testing"

	"lifeline/services/bulk"
	"lifeline/services/redact"
)

// TestEditPaths: the field paths an edit_retry takes, reading and setting them in a decoded
// input (a field is changed where it is, never added), and secrets on the path.
func TestEditPaths(t *testing.T) {
	for p, ok := range map[string]bool{"clientNip": true, "client.nip": true, "a_b-c": true, "": false, ".nip": false, "nip.": false,
		"a..b": false, "1nip": false, "nip[0]": false, "client nip": false} {
		if bulk.ValidPath(p) != ok {
			t.Errorf("ValidPath(%q) = %v", p, !ok)
		}
	}
	var doc any
	_ = json.Unmarshal([]byte(`{"clientNip": "123", "client": {"nip": "9", "name": "X"}, "n": 1}`), &doc)
	if v, ok := bulk.GetPath(doc, "client.nip"); !ok || v != "9" {
		t.Errorf("GetPath client.nip = %v %v", v, ok)
	}
	if _, ok := bulk.GetPath(doc, "client.nip.x"); ok {
		t.Error("a path through a string")
	}
	if !bulk.SetPath(doc, "clientNip", "5261040827") || !bulk.SetPath(doc, "client.nip", "1") {
		t.Error("SetPath of present fields failed")
	}
	if bulk.SetPath(doc, "missing", "x") || bulk.SetPath(doc, "client.missing", "x") || bulk.SetPath(doc, "n.x", "x") {
		t.Error("SetPath added a field")
	}
	b, _ := json.Marshal(doc)
	if string(b) != `{"client":{"name":"X","nip":"1"},"clientNip":"5261040827","n":1}` {
		t.Errorf("after the edits: %s", b)
	}
	red := redact.New(nil)
	if !bulk.Masked(red, "password") || !bulk.Masked(red, "auth.password") || bulk.Masked(red, "clientNip") {
		t.Error("Masked")
	}
}
