package i18n

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// serviceText is a message the code hands to a user in English, found in the source: where
// it was written and its text with a sample value for each formatting verb.
type serviceText struct {
	where, text string
}

// fmtVerb finds the verbs of a format string (a message built with fmt.Sprintf or Errorf).
var fmtVerb = regexp.MustCompile(`%[-+# 0]*[0-9]*(?:\.[0-9]+)?[a-zA-Z%]`)

// sample fills a format's verbs with sample values: %q a quoted word, %d a number, the rest
// a word.
func sample(format string) string {
	return fmtVerb.ReplaceAllStringFunc(format, func(v string) string {
		switch v[len(v)-1] {
		case '%':
			return "%"
		case 'q':
			return `"x"`
		case 'd':
			return "7"
		}
		return "x"
	})
}

// textOf returns the text an expression makes, with "x" for each value that is not a
// literal, and whether it has any literal part (a bare variable is no message of its own).
func textOf(e ast.Expr) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(e.Value)
		return s, err == nil
	case *ast.ParenExpr:
		return textOf(e.X)
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return "", false
		}
		l, lok := textOf(e.X)
		r, rok := textOf(e.Y)
		if !lok && !rok {
			return "", false
		}
		if !lok {
			l = "x"
		}
		if !rok {
			r = "x"
		}
		return l + r, true
	case *ast.CallExpr:
		if isCall(e, "fmt", "Sprintf") && len(e.Args) > 0 {
			if f, ok := textOf(e.Args[0]); ok {
				return sample(f), true
			}
		}
	}
	return "", false
}

// isCall reports whether c calls pkg.name (or name itself, inside pkg).
func isCall(c *ast.CallExpr, pkg, name string) bool {
	switch f := c.Fun.(type) {
	case *ast.SelectorExpr:
		x, ok := f.X.(*ast.Ident)
		return ok && x.Name == pkg && f.Sel.Name == name
	case *ast.Ident:
		return f.Name == name
	}
	return false
}

// messageMaps are the names of the maps of field messages the code fills (errs["name"] = "is
// required"), and fieldAdders the helpers that fill them (add("url", "is required")).
var (
	messageMaps = []string{"errs", "fields", "Errors"}
	fieldAdders = []string{"add"}
	// messageFuncs return a field's message (or an error whose text is one).
	messageFuncs = []string{"checkURL", "checkRecipient", "ValidateWebhookURL", "jsonProblem", "jsonKind", "walkUnstorable", "unknownKeys"}
)

// serviceTexts finds the English messages the services and handlers give users: the
// messages of apperr.Errorf, apperr.Invalid and apperr.Error, the field messages of
// apperr.Invalid and of the maps of field messages, echo.NewHTTPError's texts and
// classify.New's messages (shown with an attempt and a dead letter).
func serviceTexts(t *testing.T) []serviceText {
	t.Helper()
	root := filepath.Join("..", "..")
	var out []serviceText
	fset := token.NewFileSet()
	for _, dir := range []string{"services", "handlers", "models"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			// The demo's sandbox plays the customer's systems, not Lifeline.
			if strings.Contains(filepath.ToSlash(path), "services/sandbox/") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			add := func(e ast.Expr) {
				if s, ok := textOf(e); ok {
					rel, _ := filepath.Rel(root, fset.Position(e.Pos()).Filename)
					out = append(out, serviceText{where: rel + ":" + strconv.Itoa(fset.Position(e.Pos()).Line), text: s})
				}
			}
			addMap := func(e ast.Expr) {
				if cl, ok := e.(*ast.CompositeLit); ok {
					for _, el := range cl.Elts {
						if kv, ok := el.(*ast.KeyValueExpr); ok {
							add(kv.Value)
						}
					}
				}
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.FuncDecl:
					if n.Body != nil && n.Recv == nil && slices.Contains(messageFuncs, n.Name.Name) {
						ast.Inspect(n.Body, func(m ast.Node) bool {
							if r, ok := m.(*ast.ReturnStmt); ok {
								for _, e := range r.Results {
									if c, ok := e.(*ast.CallExpr); ok && (isCall(c, "fmt", "Errorf") || isCall(c, "errors", "New")) {
										add(&ast.CallExpr{Fun: &ast.SelectorExpr{X: &ast.Ident{Name: "fmt", NamePos: c.Pos()}, Sel: ast.NewIdent("Sprintf")}, Args: c.Args, Rparen: c.Rparen})
										continue
									}
									add(e)
								}
							}
							return true
						})
					}
				case *ast.CallExpr:
					switch {
					case (isCall(n, "models", "Errorf") || (f.Name.Name == "models" && isCall(n, "", "Errorf"))) && len(n.Args) >= 2:
						if s, ok := textOf(n.Args[1]); ok {
							rel, _ := filepath.Rel(root, fset.Position(n.Pos()).Filename)
							out = append(out, serviceText{where: rel + ":" + strconv.Itoa(fset.Position(n.Pos()).Line), text: sample(s)})
						}
					case (isCall(n, "models", "Invalid") || (f.Name.Name == "models" && isCall(n, "", "Invalid"))) && len(n.Args) == 2:
						add(n.Args[0])
						addMap(n.Args[1])
					case isCall(n, "models", "NotFound") || (f.Name.Name == "models" && isCall(n, "", "NotFound")) || isCall(n, "", "checkID"):
						if s, ok := textOf(n.Args[len(n.Args)-1]); ok {
							rel, _ := filepath.Rel(root, fset.Position(n.Pos()).Filename)
							out = append(out, serviceText{where: rel + ":" + strconv.Itoa(fset.Position(n.Pos()).Line), text: s + " not found"})
						}
					case isCall(n, "echo", "NewHTTPError") && len(n.Args) >= 2:
						add(n.Args[1])
					case isCall(n, "classify", "New") && len(n.Args) == 3:
						add(n.Args[2])
					case isCall(n, "", "merge") && len(n.Args) == 2:
						addMap(n.Args[1])
					default:
						if id, ok := n.Fun.(*ast.Ident); ok && slices.Contains(fieldAdders, id.Name) && len(n.Args) == 2 {
							add(n.Args[1])
						}
					}
				case *ast.CompositeLit:
					if sel, ok := n.Type.(*ast.SelectorExpr); (ok && sel.Sel.Name == "Error" && isIdent(sel.X, "models")) || (f.Name.Name == "models" && isIdent(n.Type, "Error")) {
						for _, el := range n.Elts {
							if kv, ok := el.(*ast.KeyValueExpr); ok && isIdent(kv.Key, "Message") {
								add(kv.Value)
							}
						}
					}
				case *ast.AssignStmt:
					for i, lhs := range n.Lhs {
						ix, ok := lhs.(*ast.IndexExpr)
						if !ok || i >= len(n.Rhs) {
							continue
						}
						var name string
						switch x := ix.X.(type) {
						case *ast.Ident:
							name = x.Name
						case *ast.SelectorExpr:
							name = x.Sel.Name
						}
						if slices.Contains(messageMaps, name) {
							add(n.Rhs[i])
						}
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

// notForUsers are texts the scan finds that no user reads as they are: the error handler
// replaces them (CSRF), or they name something in the user's own data.
var notForUsers = []string{
	"csrf: cross-site request",                  // handleError answers http.csrf
	"csrf: token missing or not this session's", // idem
	"x not found", // apperr.NotFound itself: its callers are checked one by one
}

// dynamicID matches a message id the code completes with a value ("dlq.conflict." + status).
var dynamicID = regexp.MustCompile(`^[a-z][a-z0-9_]*(?:\.[a-z0-9_]+)*\.x$`)

// translatable reports whether l has a rendering of s: a message, a message id of that
// prefix (for an id completed with a value), or a format that matches it (one may keep the
// English, as "inputMapping: %s" does with a field's name).
func translatable(l *Localizer, ids map[string]any, s string) bool {
	if l.T(s) != s {
		return true
	}
	if dynamicID.MatchString(s) {
		prefix := strings.TrimSuffix(s, "x")
		for id := range ids {
			if strings.HasPrefix(id, prefix) {
				return true
			}
		}
		return false
	}
	for _, f := range formats[l.lang] {
		if f.match.MatchString(s) {
			return true
		}
	}
	return false
}

// Every English message the services and handlers give a user has a Polish rendering: a
// message id, a translation of the text, or a format of it (locales/formats/pl.json). A new
// message without one fails here, with where it is written.
func TestServiceTextsInPolish(t *testing.T) {
	texts := serviceTexts(t)
	if len(texts) < 100 {
		t.Fatalf("found only %d messages in the code: the scan is broken", len(texts))
	}
	pl, ids := New("pl", nil), messages(t, "pl")
	seen := map[string]bool{}
	for _, st := range texts {
		if st.text == "" || slices.Contains(notForUsers, st.text) || seen[st.text] {
			continue
		}
		seen[st.text] = true
		if !translatable(pl, ids, st.text) {
			t.Errorf("%s: %q has no Polish translation", st.where, st.text)
		}
	}
}
