package dbconn

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"lifeline/services/classify"
)

// privilegedRoles are PostgreSQL's predefined roles whose members read or write every table,
// or read, write or run files of the database server: a member could read what the
// compensation has no business with, or reach out of the database server.
var privilegedRoles = []string{"pg_read_all_data", "pg_write_all_data", "pg_read_server_files", "pg_write_server_files",
	"pg_execute_server_program"}

// roleQuery reads, in one query, what makes the session's role privileged: its own
// attributes, whether it can read pg_authid (has_table_privilege answers for any role), and
// the privileged roles it is a member of (directly or not, inheriting or able to SET ROLE
// to them): another role that is a superuser, bypasses row-level security or creates roles,
// or one of privilegedRoles. pg_roles and pg_has_role are readable by every role.
const roleQuery = `SELECT r.rolsuper, r.rolbypassrls, r.rolcreaterole,
  pg_catalog.has_table_privilege('pg_catalog.pg_authid', 'SELECT'),
  COALESCE(bool_or(g.rolsuper), false), COALESCE(bool_or(g.rolbypassrls), false), COALESCE(bool_or(g.rolcreaterole), false),
  COALESCE(array_agg(g.rolname::text ORDER BY g.rolname) FILTER (WHERE g.rolname::text = ANY($1::text[])), '{}')
FROM pg_catalog.pg_roles r
LEFT JOIN pg_catalog.pg_roles g ON g.oid <> r.oid AND pg_catalog.pg_has_role(r.oid, g.oid, 'MEMBER')
  AND (g.rolsuper OR g.rolbypassrls OR g.rolcreaterole OR g.rolname::text = ANY($1::text[]))
WHERE r.rolname = current_user
GROUP BY r.oid, r.rolsuper, r.rolbypassrls, r.rolcreaterole`

// checkRole refuses a session whose role is privileged (roleQuery): a superuser, a member
// of a superuser role, a role that can read pg_authid, bypasses row-level security
// (BYPASSRLS), can create roles (CREATEROLE: before PostgreSQL 16 it can make itself a
// member of any role that is not a superuser) or is a member of one of privilegedRoles. The
// refusal is an *Error PRIVILEGED_ROLE (permanent) that says why; a failure of the query
// itself is returned as it is, for classified.
func checkRole(ctx context.Context, conn *pgx.Conn, user string) error {
	var super, bypass, create, authid, memberSuper, memberBypass, memberCreate bool
	var predefined []string
	err := conn.QueryRow(ctx, roleQuery, privilegedRoles).Scan(&super, &bypass, &create, &authid, &memberSuper, &memberBypass, &memberCreate, &predefined)
	if errors.Is(err, pgx.ErrNoRows) {
		return privileged(user, "is not in pg_roles, so its rights cannot be checked")
	}
	if err != nil {
		return err
	}
	var why string
	switch {
	case super:
		why = "is a superuser"
	case memberSuper:
		why = "is a member of a superuser role"
	case len(predefined) > 0:
		// Names of privilegedRoles only: nothing the server sent is repeated.
		name := "a role that reads or writes all data or the server's files"
		for _, r := range privilegedRoles {
			if slices.Contains(predefined, r) {
				name = r
				break
			}
		}
		why = "is a member of " + name
	case authid:
		why = "can read pg_authid"
	case bypass || memberBypass:
		why = "bypasses row-level security (BYPASSRLS)"
	case create || memberCreate:
		why = "can create roles (CREATEROLE)"
	default:
		return nil
	}
	return privileged(user, why)
}

func privileged(user, why string) *Error {
	return &Error{Type: classify.Permanent, Code: "PRIVILEGED_ROLE",
		Message: fmt.Sprintf("the connection's role %q %s; use a role with only the rights the compensation needs", user, why)}
}
