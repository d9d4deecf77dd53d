package notify

import "slices"

// TextKeys lists the text keys of a language (tests).
func TextKeys(lang string) []string {
	var out []string
	for k := range texts[lang] {
		out = append(out, k)
	}
	for k := range errorTypes[lang] {
		out = append(out, "errorType."+k)
	}
	slices.Sort(out)
	return out
}

// HasText reports whether a language has the key (tests).
func HasText(lang, key string) bool {
	if k, ok := cutPrefix(key, "errorType."); ok {
		_, ok := errorTypes[lang][k]
		return ok
	}
	_, ok := texts[lang][key]
	return ok
}

func cutPrefix(s, p string) (string, bool) {
	if len(s) >= len(p) && s[:len(p)] == p {
		return s[len(p):], true
	}
	return s, false
}
