package pages

// JSONFormVM is what the item page's fields built from the data need (static/js/forms.js):
// the textareas stay the forms' fields, the script shows them as fields.
type JSONFormVM struct {
	// Masked is the text that stands for a masked value (a string holding it is shown
	// masked and sent back as shown unless replaced, so the stored value is kept).
	Masked string
	// PolicySchema is the retry-policy override's fields as JSON: an array of
	// {key, label, kind: int|float|enum|types|list, min, max, step, default, zeroAllowed,
	// hint, range, defaultLabel, options: [{value, label}]}.
	PolicySchema string
}
