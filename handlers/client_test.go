package handlers_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/google/uuid"

	"lifeline/handlers/openapi/client"
	"lifeline/models"
	"lifeline/models/modeltest"
)

// contractDoer sends the generated client's requests and holds each exchange to the
// OpenAPI document, as do does for the handwritten ones.
type contractDoer struct{ t testing.TB }

func (d contractDoer) Do(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		return nil, err
	}
	res.Body = io.NopCloser(bytes.NewReader(b))
	checkContract(d.t, req, string(body), res.StatusCode, res.Header, b)
	return res, nil
}

// TestGeneratedClient: the Go client generated from the OpenAPI document (handlers/openapi/
// client, `make generate`) works against the real router: it lists the workflows, starts
// an execution (and repeats it under the same Idempotency-Key), reads it back, finds its
// organization's dead letter in the list, reads it and resolves it; and another
// organization's token gets the typed 404.
func TestGeneratedClient(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		tn := a.tenant("Biuro Klient API")
		other := a.tenant("Biuro Obce")
		ctx := context.Background()
		api := func(tok string) *client.ClientWithResponses {
			c, err := client.NewClientWithResponses(a.srv.URL, client.WithHTTPClient(contractDoer{t}),
				client.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
					r.Header.Set("Authorization", "Bearer "+tok)
					return nil
				}))
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		c := api(tn.token)

		wfs, err := c.ListWorkflowsWithResponse(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if wfs.JSON200 == nil || len(wfs.JSON200.Items) != 1 || wfs.JSON200.Items[0].Id.String() != tn.wfID {
			t.Fatalf("list workflows: %d %s", wfs.StatusCode(), wfs.Body)
		}
		wfID := wfs.JSON200.Items[0].Id

		key := "client-" + uuid.NewString()
		input := map[string]any{"nip": "5260250274"}
		started, err := c.StartExecutionWithResponse(ctx, wfID, &client.StartExecutionParams{IdempotencyKey: &key},
			client.StartExecutionJSONRequestBody{Input: &input})
		if err != nil {
			t.Fatal(err)
		}
		if started.JSON201 == nil || started.JSON201.WorkflowId != wfID {
			t.Fatalf("start: %d %s", started.StatusCode(), started.Body)
		}
		again, err := c.StartExecutionWithResponse(ctx, wfID, &client.StartExecutionParams{IdempotencyKey: &key},
			client.StartExecutionJSONRequestBody{Input: &input})
		if err != nil {
			t.Fatal(err)
		}
		if again.JSON200 == nil || again.JSON200.Id != started.JSON201.Id || again.HTTPResponse.Header.Get("Idempotency-Replayed") != "true" {
			t.Fatalf("the same Idempotency-Key again: %d %s", again.StatusCode(), again.Body)
		}
		ex, err := c.GetExecutionWithResponse(ctx, started.JSON201.Id)
		if err != nil {
			t.Fatal(err)
		}
		if ex.JSON200 == nil || ex.JSON200.Id != started.JSON201.Id || ex.JSON200.Steps == nil || len(*ex.JSON200.Steps) != 1 {
			t.Fatalf("get execution: %d %s", ex.StatusCode(), ex.Body)
		}

		pending := client.DLQStatus("pending")
		list, err := c.ListDLQWithResponse(ctx, &client.ListDLQParams{WorkflowId: &wfID, Status: &pending})
		if err != nil {
			t.Fatal(err)
		}
		if list.JSON200 == nil || len(list.JSON200.Items) == 0 {
			t.Fatalf("list DLQ: %d %s", list.StatusCode(), list.Body)
		}
		found := false
		for _, it := range list.JSON200.Items {
			found = found || it.Id.String() == tn.dlqID
		}
		if !found {
			t.Fatalf("the tenant's dead letter %s is not in the list: %s", tn.dlqID, list.Body)
		}
		dlqID := uuid.MustParse(tn.dlqID)
		item, err := c.GetDLQItemWithResponse(ctx, dlqID)
		if err != nil {
			t.Fatal(err)
		}
		if item.JSON200 == nil || item.JSON200.ExecutionId.String() != tn.execID || item.JSON200.Status != "pending" || item.JSON200.History == nil {
			t.Fatalf("get DLQ item: %d %s", item.StatusCode(), item.Body)
		}

		notes := "Paid by hand at the bank."
		done, err := c.ActOnDLQItemWithResponse(ctx, dlqID, &client.ActOnDLQItemParams{},
			client.ActOnDLQItemJSONRequestBody{Action: client.ActOnDLQItemJSONBodyActionResolve, ResolutionNotes: &notes})
		if err != nil {
			t.Fatal(err)
		}
		if done.JSON200 == nil || done.JSON200.Status != models.DLQResolved || done.JSON200.DeadLetterId != dlqID {
			t.Fatalf("resolve: %d %s", done.StatusCode(), done.Body)
		}

		// Another organization's token: the typed 404, with the error shape.
		nf, err := api(other.token).GetDLQItemWithResponse(ctx, dlqID)
		if err != nil {
			t.Fatal(err)
		}
		if nf.JSON404 == nil || nf.JSON404.Error.Code != "not_found" {
			t.Fatalf("another organization's item: %d %s", nf.StatusCode(), nf.Body)
		}
	})
}
