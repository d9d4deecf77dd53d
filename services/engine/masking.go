package engine

import (
	"fmt"

	"lifeline/models"
	"lifeline/services/definition"
	"lifeline/services/redact"
)

// Secrets found by their value.
//
// A value that arrived under a secret-looking key (the execution's input, a step's output,
// a header or query parameter of a step's configuration, a literal secret of the
// definition, a compensation's configuration) is a secret wherever it goes next: a template
// may copy it into a plain key ({"pw": "{{ input.password }}"}), upper-case it, or embed it
// in a longer string or a JSON text ({{ toJSON(input) }}). The engine collects those values
// (redact.Redactor.SecretValues) and:
//   - seals them where they are found inside what a replay needs (execution inputs, attempt
//     inputs and outputs, compensation configurations): the stored JSON keeps an envelope
//     in their place, opened only in memory when a step runs;
//   - masks them as [REDACTED] in everything else it stores or shows (error messages and
//     traces, error records, dead-letter snapshots, audit details, compensation results,
//     notification texts, subjects).
//
// Values shorter than redact.MinValueLength are masked only under their keys.

// masker returns the masker of the secrets of def (the literal values under secret-looking
// keys of every step's configuration and compensation) and of the values given (decoded
// JSON: an environment, a rendered configuration…; credentialValues each as a whole). nil
// when there are none.
func (e *secrets) masker(def *definition.Definition, values ...any) *redact.Masker {
	found := defSecrets(e.redactor, def)
	for _, v := range values {
		switch v := v.(type) {
		case credentialValues:
			found = append(found, v...)
		case knownSecrets:
			found = append(found, v...)
		default:
			found = append(found, e.redactor.SecretValues(v)...)
		}
	}
	return redact.NewMasker(found...)
}

// knownSecrets are secret values found already (chainEnv.secrets): the masker takes each as
// a whole.
type knownSecrets []string

// defSecrets are def's literal secrets: the values under secret-looking keys of every step's
// configuration and compensation (none for a nil def).
func defSecrets(r *redact.Redactor, def *definition.Definition) []string {
	var found []string
	if def != nil {
		for _, st := range def.Steps {
			found = append(found, r.SecretValues(st.Config)...)
			if st.Compensation != nil {
				found = append(found, r.SecretValues(st.Compensation.Config)...)
			}
		}
	}
	return found
}

// sealFound is seal that also seals, inside every string of raw, the secrets m finds (any
// key). Without a Sealer that can (no keys configured: tests), raw is sealed as seal does:
// what a step needs is never masked away.
func (e *secrets) sealFound(raw []byte, table, id, column string, m *redact.Masker) ([]byte, error) {
	fs, ok := e.sealer.(models.FoundSealer)
	if m == nil || len(raw) == 0 || !ok {
		return e.seal(raw, table, id, column)
	}
	out, err := fs.SealFound(raw, aad(table, id, column), m.Find)
	if err != nil {
		return nil, fmt.Errorf("encrypt %s.%s: %w", table, column, err)
	}
	return out, nil
}

// maskText hides secrets in error text: the secrets m finds, and the values of
// secret-looking query parameters in URLs.
func (e *secrets) maskText(s string, m *redact.Masker) string {
	return e.redactor.Text(m.Mask(s))
}
