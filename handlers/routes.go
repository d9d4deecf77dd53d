package handlers

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"lifeline/models"
	"lifeline/static"
)

// routes registers every URL of the app. Pages and API routes are named, so URLs are built
// with Reverse, never by hand.
func (s *Server) routes() {
	e := s.e
	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	if m := s.Metrics; m != nil && m.Token != "" && m.Handler != nil {
		e.GET("/metrics", (&metricsHandler{token: []byte(m.Token), handler: m.Handler}).Serve).Name = "metrics"
	}
	e.StaticFS("/static", static.FS)
	if s.Sandbox != nil {
		e.Any("/sandbox/*", echo.WrapHandler(http.StripPrefix("/sandbox", s.Sandbox)))
	}
	e.POST("/hooks/:token", newWebhookHandler(s.Workflows, s.Engine).Receive).Name = "webhook"

	e.GET("/login", s.loginPage).Name = "login"
	e.POST("/login", s.login)
	e.POST("/logout", s.logout).Name = "logout"
	e.POST("/settings/language", s.setLanguage).Name = "language"

	app := e.Group("", s.requireUser, formText)
	// The landing page: an accountant's morning (Today), the workflows for the others.
	app.GET("/", func(c echo.Context) error { return c.Redirect(http.StatusSeeOther, s.landing(principal(c))) })
	app.GET("/today", newTodayHandler(s.chrome, clientsOf(s.Deps)).Page).Name = "today"
	wfs := newWorkflowsHandler(s.chrome, s.Workflows, s.reads, s.Engine, s.BaseURL)
	app.GET("/workflows", wfs.List).Name = "workflows"
	app.POST("/workflows", wfs.Create, requireRole(models.RoleAdmin)).Name = "workflows.create"
	app.GET("/workflows/:id", wfs.Show).Name = "workflow"
	app.POST("/workflows/:id/executions", wfs.Start, requireRole(models.RoleAccountant)).Name = "workflow.start"
	app.POST("/workflows/:id/money", wfs.SaveMoney, requireRole(models.RoleAdmin)).Name = "workflow.money"
	rules := s.rules
	recovery := newDLQActionsHandler(s.chrome, s.Engine, s.reads, s.Workflows, s.auditLog, rules)
	recovery.periods = periodsOf(s.Deps)
	recovery.clientValues = clientsOf(s.Deps).FieldValues
	execs := newExecutionsHandler(s.chrome, s.reads, s.Workflows, recovery)
	recovery.running = execs.runningStep
	var asksUI *InterventionsHandler
	if s.Engine != nil {
		// Requests of ask steps (issue 25): everyone reads them; accountants and above answer
		// those they hold; admins cancel a waiting execution.
		asksUI = newInterventionsHandler(s.chrome, s.Engine.Asks(), s.reads, s.Workflows, s.escalation.Members)
		execs.waiting, execs.open = asksUI.waitingPanel, asksUI.openInterventionID
		app.GET("/waiting", asksUI.Waiting).Name = "waiting"
		app.GET("/interventions/:id", asksUI.Show).Name = "intervention"
		app.POST("/interventions/:id/answer", asksUI.AnswerForm, requireRole(models.RoleAccountant)).Name = "intervention.answer"
		app.POST("/executions/:id/cancel", asksUI.Cancel, requireRole(models.RoleAdmin)).Name = "execution.cancel"
	}
	app.GET("/executions", execs.List).Name = "executions"
	app.GET("/executions/:id", execs.Show).Name = "execution"
	dlqList := newDLQHandler(s.chrome, s.reads, s.Workflows, rules)
	dlqList.deadlines = s.deadlines
	// "Kolejka DLQ" leads with the problems (failure groups); the item list is one click
	// away at /dlq/items. Without groups, /dlq is the item list as before.
	app.GET("/dlq/items", dlqList.List).Name = "dlq"
	var groupsUI *GroupsHandler
	if s.groups != nil {
		groupsUI = newGroupsHandler(s.chrome, s.groups, s.Workflows, s.reads, rules, recovery.movesMoney)
		groupsUI.deadlines = s.deadlines
		recovery.groupTitle = func(ctx context.Context, orgID, id string) (string, error) {
			g, err := s.groups.Get(ctx, orgID, id)
			if err != nil {
				return "", err
			}
			return g.Title, nil
		}
		app.GET("/dlq", groupsUI.Problems).Name = "dlq.problems"
		app.GET("/dlq/problems", func(c echo.Context) error { return c.Redirect(http.StatusMovedPermanently, s.url("dlq.problems")) })
		app.GET("/dlq/groups/:id", groupsUI.Show).Name = "dlq.group"
		app.POST("/dlq/groups/:id/mute", groupsUI.Mute, requireRole(models.RoleAccountant)).Name = "dlq.group.mute"
		app.POST("/dlq/groups/:id/ask", groupsUI.Ask, requireRole(models.RoleAccountant)).Name = "dlq.group.ask"
		app.POST("/dlq/:id/split", groupsUI.Split, requireRole(models.RoleAccountant)).Name = "dlq.split"
	} else {
		app.GET("/dlq", dlqList.List)
	}
	var held *HeldHandler
	if s.Engine != nil {
		// Poison inputs (issue 22): everyone sees the flags; admins quarantine and release.
		held = newHeldHandler(s.chrome, s.Engine.Held())
		flags := &flagger{links: s.links, held: s.Engine.Held()}
		recovery.poison, recovery.flags = s.poison, flags
		if groupsUI != nil {
			groupsUI.poison, groupsUI.flags = s.poison, flags
		}
		app.GET("/settings/quarantine", held.List, requireRole(models.RoleAdmin)).Name = "quarantine"
		app.POST("/settings/quarantine", held.Hold, requireRole(models.RoleAdmin)).Name = "quarantine.hold"
		app.POST("/settings/quarantine/:id/release", held.Release, requireRole(models.RoleAdmin)).Name = "quarantine.release"
	}
	app.GET("/dlq/:id", recovery.Show).Name = "dlq.item"
	app.POST("/dlq/:id/actions", recovery.Submit, requireRole(models.RoleAccountant)).Name = "dlq.actions"
	app.POST("/dlq/:id/ask", recovery.Ask, requireRole(models.RoleAccountant)).Name = "dlq.ask"
	app.POST("/dlq/:id/changes/:cid/approve", recovery.Approve, requireRole(models.RoleAdmin)).Name = "dlq.change.approve"
	app.POST("/dlq/:id/changes/:cid/reject", recovery.Reject, requireRole(models.RoleAdmin)).Name = "dlq.change.reject"
	app.POST("/dlq/:id/reopen", recovery.Reopen, requireRole(models.RoleAdmin)).Name = "dlq.reopen"
	rollback := newRollbackHandler(s.chrome, s.Engine, s.reads, s.reads)
	app.POST("/executions/:id/rollback", rollback.Start, requireRole(models.RoleAdmin)).Name = "execution.rollback"
	app.POST("/compensations/:id/actions", rollback.Act, requireRole(models.RoleAdmin)).Name = "compensation.actions"
	bulkActions := newBulkHandler(s.chrome, s.Bulk, s.reads, rules)
	if groupsUI != nil {
		bulkActions.groupRule = groupsUI.rule
	}
	if s.Bulk != nil {
		// Accountants retry in bulk (as they retry one item); resolve, skip and cancel are admins'.
		app.POST("/dlq/bulk", bulkActions.Start, requireRole(models.RoleAccountant)).Name = "dlq.bulk.start"
		app.GET("/dlq/bulk/:id", bulkActions.Show, requireRole(models.RoleAccountant)).Name = "dlq.bulk"
		app.POST("/dlq/bulk/:id/cancel", bulkActions.Cancel, requireRole(models.RoleAdmin)).Name = "dlq.bulk.cancel"
	}
	profile := newProfileHandler(s.chrome, s.Auth)
	app.GET("/profile", profile.Show).Name = "profile"
	app.POST("/profile", profile.Save).Name = "profile.save"
	admin := requireRole(models.RoleAdmin)
	breakers := newBreakersHandler(s.chrome, s.reads, s.Workflows, s.Engine)
	clientPages := newClientsHandler(s.chrome, clientsOf(s.Deps))
	app.GET("/clients/:key", clientPages.Page).Name = "client"
	app.GET("/breakers", breakers.List).Name = "breakers"
	analyticsPage := newAnalyticsHandler(s.chrome, s.analytics, s.Workflows)
	app.GET("/analytics", analyticsPage.Page, requireRole(models.RoleAccountant)).Name = "analytics"
	app.GET("/analytics/export.csv", analyticsPage.Export, requireRole(models.RoleAccountant)).Name = "analytics.export"
	app.POST("/breakers/:id/reset", breakers.Reset, admin).Name = "breakers.reset"
	app.POST("/breakers/:id/open", breakers.Open, admin).Name = "breakers.open"
	app.POST("/settings/organization", profile.SaveOrg, admin).Name = "organization.save"
	rulesPage := newRulesHandler(s.chrome, rules)
	app.GET("/settings/rules", rulesPage.Show, admin).Name = "organization.rules"
	app.POST("/settings/rules", rulesPage.Save, admin).Name = "organization.rules.save"
	escalationPage := newEscalationHandler(s.chrome, s.escalation)
	app.GET("/settings/escalation", escalationPage.Show, admin).Name = "organization.escalation"
	app.POST("/settings/escalation", escalationPage.Save, admin).Name = "organization.escalation.save"
	if groupsUI != nil {
		groupsUI.members = s.escalation.Members
	}
	auditLog := newAuditHandler(s.chrome, s.auditLog)
	app.GET("/audit", auditLog.List, admin).Name = "audit"
	app.GET("/audit/export.csv", auditLog.Export, admin).Name = "audit.export"
	tokens := newTokensHandler(s.chrome, s.Auth)
	app.GET("/settings/tokens", tokens.List, admin).Name = "tokens"
	app.POST("/settings/tokens", tokens.Create, admin).Name = "tokens.create"
	app.POST("/settings/tokens/:id/revoke", tokens.Revoke, admin).Name = "tokens.revoke"
	conns := newConnectionsHandler(s.chrome, connectionsOf(s.Deps))
	app.GET("/settings/connections", conns.List, admin).Name = "connections"
	app.POST("/settings/connections", conns.Create, admin).Name = "connections.create"
	app.GET("/settings/connections/:id", conns.Edit, admin).Name = "connection"
	app.POST("/settings/connections/:id", conns.Update, admin).Name = "connection.update"
	app.POST("/settings/connections/:id/delete", conns.Delete, admin).Name = "connection.delete"
	app.POST("/settings/connections/:id/test", conns.Test, admin).Name = "connection.test"
	creds := newCredentialsHandler(s.chrome, credentialsOf(s.Deps))
	app.GET("/settings/credentials", creds.List, admin).Name = "credentials"
	app.POST("/settings/credentials", creds.Save, admin).Name = "credentials.save"
	app.POST("/settings/credentials/:id/delete", creds.Delete, admin).Name = "credential.delete"
	closedPeriods := newPeriodsHandler(s.chrome, periodsOf(s.Deps))
	app.GET("/settings/periods", closedPeriods.List, admin).Name = "periods"
	app.POST("/settings/periods", closedPeriods.Close, admin).Name = "periods.close"
	app.POST("/settings/periods/:id/reopen", closedPeriods.Reopen, admin).Name = "period.reopen"
	var health *HealthHandler
	if s.Engine != nil {
		health = newHealthHandler(s.chrome, s.Engine)
		app.GET("/settings/health", health.Show, admin).Name = "health"
		app.POST("/settings/health/quarantine/:id/release", health.Release, admin).Name = "health.release"
	}
	// The workflow page's notifications card: nothing to show (204) without notifications.
	card := func(c echo.Context) error { return c.NoContent(http.StatusNoContent) }
	if s.Notify != nil {
		np := newNotifyPagesHandler(s.chrome, s.Notify, s.Workflows)
		card = np.WorkflowCard
		app.GET("/settings/notifications", np.Settings, admin).Name = "notifications.settings"
		app.POST("/settings/notifications", np.SaveSettings, admin).Name = "notifications.settings.save"
		app.POST("/settings/notifications/test", np.Test, admin).Name = "notifications.test"
		app.GET("/notifications/deliveries", np.Deliveries, admin).Name = "notifications.deliveries"
		app.POST("/notifications/deliveries/:id/resend", np.Resend, admin).Name = "notifications.resend"
		app.GET("/notifications", np.Inbox).Name = "notifications"
		app.GET("/notifications/bell", np.Bell).Name = "notifications.bell"
		app.POST("/notifications/read-all", np.MarkAllRead).Name = "notifications.read_all"
		app.POST("/notifications/:id/read", np.MarkRead).Name = "notifications.read"
		app.GET("/notifications/:id/open", np.Open).Name = "notifications.open"
		app.GET("/notifications/:id/failures", np.Failures).Name = "notifications.failures"
		if s.Workflows != nil {
			app.GET("/workflows/:id/notifications/edit", np.WorkflowEdit, admin).Name = "workflow.notifications.edit"
			app.POST("/workflows/:id/notifications/edit", np.WorkflowSave, admin).Name = "workflow.notifications.save"
		}
	}
	app.GET("/workflows/:id/notifications", card).Name = "workflow.notifications"
	if s.DemoInbox != nil {
		// Admins only: the demo's mail server and stand-ins are the process's, not one organization's.
		app.GET("/demo/inbox", newDemoInboxHandler(s.chrome, s.DemoInbox).Show, admin).Name = "demo.inbox"
	}

	// The API's contract (handlers/openapi): public, see apiDocument.
	e.GET("/api/v1/openapi.json", apiDocument()).Name = "api.openapi"
	api := e.Group("/api/v1", s.requireAPI)
	api.GET("/workflows", wfs.APIList).Name = "api.workflows"
	api.POST("/workflows", wfs.APICreate, requireRole(models.RoleAdmin))
	api.GET("/workflows/:id", wfs.APIGet).Name = "api.workflow"
	api.PUT("/workflows/:id", wfs.APIUpdate, requireRole(models.RoleAdmin))
	api.POST("/workflows/:id/executions", wfs.APIStart, requireRole(models.RoleAccountant))
	api.GET("/executions", execs.APIList).Name = "api.executions"
	api.GET("/executions/:id", execs.APIGet).Name = "api.execution"
	if asksUI != nil {
		api.GET("/interventions", asksUI.APIList).Name = "api.interventions"
		api.GET("/interventions/:id", asksUI.APIGet).Name = "api.intervention"
		api.POST("/interventions/:id/answer", asksUI.APIAnswer, requireRole(models.RoleAccountant)).Name = "api.intervention.answer"
		api.POST("/executions/:id/cancel", asksUI.APICancel, requireRole(models.RoleAdmin)).Name = "api.execution.cancel"
	}
	api.GET("/dlq", dlqList.API).Name = "api.dlq"
	api.GET("/clients/:key", clientPages.API).Name = "api.client"
	api.GET("/deadlines", (&DeadlinesHandler{svc: s.deadlines}).API).Name = "api.deadlines"
	api.GET("/analytics", analyticsPage.API, requireRole(models.RoleAccountant)).Name = "api.analytics"
	if s.groups != nil {
		// Failure groups (issue 22): everyone reads them; accountants act, as on one item.
		api.GET("/dlq/groups", groupsUI.APIList).Name = "api.dlq.groups"
		api.GET("/dlq/groups/:id", groupsUI.APIGet).Name = "api.dlq.group"
		api.POST("/dlq/groups/:id/actions", groupsUI.APIAct, requireRole(models.RoleAccountant)).Name = "api.dlq.group.actions"
		api.POST("/dlq/:id/split", groupsUI.APISplit, requireRole(models.RoleAccountant)).Name = "api.dlq.split"
	}
	api.GET("/dlq/:id", recovery.APIGet).Name = "api.dlq.item"
	api.POST("/dlq/:id/actions", recovery.APIAction, requireRole(models.RoleAccountant)).Name = "api.dlq.actions"
	api.POST("/executions/:id/retry", recovery.APIRetryExecution, requireRole(models.RoleAccountant)).Name = "api.execution.retry"
	api.POST("/dlq/:id/ask", recovery.APIAsk, requireRole(models.RoleAccountant)).Name = "api.dlq.ask"
	api.GET("/dlq/:id/changes", recovery.APIChanges).Name = "api.dlq.changes"
	api.GET("/dlq/:id/poison", newPoisonHandler(s.poison).APIItem).Name = "api.dlq.poison"
	if held != nil {
		// Quarantined values: everyone reads them; admins quarantine and release.
		api.GET("/quarantine", held.APIList).Name = "api.quarantine"
		api.POST("/quarantine", held.APIHold, requireRole(models.RoleAdmin)).Name = "api.quarantine.hold"
		api.POST("/quarantine/:id/release", held.APIRelease, requireRole(models.RoleAdmin)).Name = "api.quarantine.release"
	}
	api.POST("/dlq/:id/changes/:cid/approve", recovery.APIApprove, requireRole(models.RoleAdmin)).Name = "api.dlq.change.approve"
	api.POST("/dlq/:id/changes/:cid/reject", recovery.APIReject, requireRole(models.RoleAdmin)).Name = "api.dlq.change.reject"
	api.POST("/dlq/:id/reopen", recovery.APIReopen, requireRole(models.RoleAdmin)).Name = "api.dlq.reopen"
	api.GET("/organization/settings", rulesPage.APIGet, admin).Name = "api.organization.settings"
	api.PATCH("/organization/settings", rulesPage.APIPatch, admin)
	api.GET("/organization/escalation", escalationPage.APIGet, admin).Name = "api.organization.escalation"
	api.PUT("/organization/escalation", escalationPage.APIPut, admin)
	api.POST("/executions/:id/rollback", rollback.APIStart, requireRole(models.RoleAdmin)).Name = "api.execution.rollback"
	api.POST("/dlq/:id/rollback", rollback.APIStartDLQ, requireRole(models.RoleAdmin)).Name = "api.dlq.rollback"
	api.POST("/compensations/:id/actions", rollback.APIAct, requireRole(models.RoleAdmin)).Name = "api.compensation.actions"
	api.GET("/breakers", breakers.API).Name = "api.breakers"
	api.POST("/breakers/:id/reset", breakers.APIReset, admin).Name = "api.breakers.reset"
	api.POST("/breakers/:id/open", breakers.APIOpen, admin).Name = "api.breakers.open"
	api.GET("/connections", conns.APIList, admin).Name = "api.connections"
	api.POST("/connections", conns.APICreate, admin)
	api.GET("/connections/:id", conns.APIGet, admin).Name = "api.connection"
	api.PUT("/connections/:id", conns.APIUpdate, admin)
	api.DELETE("/connections/:id", conns.APIDelete, admin)
	api.POST("/connections/:id/test", conns.APITest, admin).Name = "api.connection.test"
	// Closed periods (issue 23): every member reads, admins close and reopen.
	api.GET("/periods/closed", closedPeriods.APIList).Name = "api.periods.closed"
	api.POST("/periods/closed", closedPeriods.APIClose, admin)
	api.DELETE("/periods/closed/:id", closedPeriods.APIReopen, admin).Name = "api.period.closed"
	if health != nil {
		api.GET("/health/quarantine", health.APIList, admin).Name = "api.health.quarantine"
		api.POST("/health/quarantine/:id/release", health.APIRelease, admin).Name = "api.health.release"
	}
	if s.Notify != nil {
		nh := newNotificationsHandler(s.chrome, s.Notify)
		api.GET("/notifications/settings", nh.APISettings, admin).Name = "api.notifications.settings"
		api.PUT("/notifications/settings", nh.APISaveSettings, admin)
		api.POST("/notifications/test", nh.APITest, admin).Name = "api.notifications.test"
		api.GET("/notifications/deliveries", nh.APIDeliveries, admin).Name = "api.notifications.deliveries"
		api.POST("/notifications/deliveries/:id/resend", nh.APIResend, admin).Name = "api.notifications.resend"
		api.GET("/notifications", nh.APIInbox).Name = "api.notifications"
		api.POST("/notifications/read-all", nh.APIReadAll).Name = "api.notifications.read_all"
		api.POST("/notifications/:id/read", nh.APIRead).Name = "api.notifications.read"
	}
	if s.Bulk != nil {
		api.POST("/dlq/bulk", bulkActions.APICreate, requireRole(models.RoleAccountant)).Name = "api.dlq.bulk.create"
		api.GET("/dlq/bulk/:id", bulkActions.APIGet, requireRole(models.RoleAccountant)).Name = "api.dlq.bulk"
		api.POST("/dlq/bulk/:id/cancel", bulkActions.APICancel, requireRole(models.RoleAdmin)).Name = "api.dlq.bulk.cancel"
	}
}
