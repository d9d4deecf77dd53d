package components

import "context"

type roleKey struct{}

// WithRole returns ctx carrying the reader's role (admin, accountant, viewer…): texts that
// tell the reader what to do say what that role can do (the error types' tooltips).
func WithRole(ctx context.Context, role string) context.Context {
	return context.WithValue(ctx, roleKey{}, role)
}

// roleOf returns the role in ctx ("" when there is none).
func roleOf(ctx context.Context) string {
	r, _ := ctx.Value(roleKey{}).(string)
	return r
}
