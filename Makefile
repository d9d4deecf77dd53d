# Lifeline. `make run` serves the demo; `make test` runs everything on SQLite and PostgreSQL.
SHELL := /bin/bash
GO ?= go
export CGO_ENABLED ?= 0

.PHONY: help run build test test-short test-race chaos bench generate verify migrate lint clean

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

run: ## Serve http://localhost:8080 on embedded SQLite with demo data and demo traffic
	LIFELINE_DEMO=$${LIFELINE_DEMO:-true} $(GO) run ./cmd/web serve

build: ## Build bin/lifeline
	$(GO) build -o bin/lifeline ./cmd/web

test: ## Run the whole suite on SQLite and PostgreSQL (starts a throwaway PostgreSQL unless TEST_DATABASE_URL is set)
	./scripts/with-postgres.sh $(GO) test -count=1 -timeout 20m ./...

test-race: ## The engine, jobs and handlers packages under the race detector, on SQLite and PostgreSQL (~2 min)
	CGO_ENABLED=1 ./scripts/with-postgres.sh $(GO) test -race -count=1 -timeout 20m ./services/engine/ ./services/jobs/ ./handlers/

test-short: ## The suite without the slow real-time tests
	./scripts/with-postgres.sh $(GO) test -count=1 -short ./...

chaos: ## Full-size failure tests: chaos (1,000 executions, 20 kill -9) and 5 s + 60 s database outages (make test runs them small / 5 s only)
	LIFELINE_CHAOS=full LIFELINE_OUTAGE_LONG=1 ./scripts/with-postgres.sh $(GO) test -count=1 -timeout 30m -v -run '^(TestChaos|TestDatabaseOutage.*)$$' ./services/engine/

# One package at a time (-p 1): seeding a million dead letters must not slow the throughput figures.
bench: ## Benchmarks: steps per second against River alone, retry lateness, memory (SQLite and a durable PostgreSQL); the DLQ list at 1,000,000 items (PostgreSQL, seeding takes minutes)
	PG_DURABLE=1 ./scripts/with-postgres.sh $(GO) test -p 1 -run '^$$' -bench . -benchtime 1x -timeout 60m ./... | ./scripts/bench-table.sh

generate: ## Regenerate templ components and the API client (from handlers/openapi/openapi.yaml)
	$(GO) tool templ generate -path views
	$(GO) tool oapi-codegen -config handlers/openapi/client/oapi-codegen.yaml handlers/openapi/openapi.yaml

verify: generate ## Check that generated code is committed
	git diff --exit-code -- views handlers/openapi/client

lint: ## go vet, staticcheck, and go.mod/go.sum as `go mod tidy` leaves them
	$(GO) vet ./...
	PATH="$$PATH:$$($(GO) env GOPATH)/bin" staticcheck ./...
	./scripts/check-tidy.sh

migrate: ## Apply migrations to DATABASE_URL (default ./data/lifeline.db)
	$(GO) run ./cmd/web migrate

clean: ## Remove build output and the local database
	rm -rf bin data
