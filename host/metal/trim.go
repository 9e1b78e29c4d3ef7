package metal

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
)

// Some answers carry far more than the CCM reads, and the SDK decodes all of
// it (each object twice: once into its struct, once into a map for
// AdditionalProperties). The worst is a device's BGP neighbours: routes_in
// lists every prefix of the project, so at 10,000 Elastic IPs each answer is
// about a megabyte, and reading the neighbours of 1,000 nodes allocated tens
// of gigabytes in the scale bench. A trimmer rewrites a successful answer's
// body before the SDK sees it, keeping the SDK's request, errors and types.

type trimKey struct{}

// trimmer rewrites the body of a 200 answer; on error the body is passed on
// as it came, for the SDK to decode or to report.
type trimmer func([]byte) ([]byte, error)

func withTrim(ctx context.Context, t trimmer) context.Context {
	return context.WithValue(ctx, trimKey{}, t)
}

// trimResponse applies the request's trimmer, if any, to a 200 answer.
func trimResponse(req *http.Request, resp *http.Response) {
	t, ok := req.Context().Value(trimKey{}).(trimmer)
	if !ok || resp == nil || resp.StatusCode != http.StatusOK || resp.Body == nil {
		return
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err == nil {
		if trimmed, terr := t(body); terr == nil {
			body = trimmed
		}
	}
	// A read error is the SDK's to report; what was read still goes on,
	// which makes it a decoding error there rather than a hang.
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Del("Content-Length")
}

// dropNeighbourRoutes removes routes_in and routes_out from every entry of
// bgp_neighbors: the CCM reads the ASNs, addresses and password only.
func dropNeighbourRoutes(body []byte) ([]byte, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, err
	}
	raw, ok := top["bgp_neighbors"]
	if !ok {
		return body, nil
	}
	var neighbours []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &neighbours); err != nil {
		return nil, err
	}
	for _, n := range neighbours {
		delete(n, "routes_in")
		delete(n, "routes_out")
	}
	b, err := json.Marshal(neighbours)
	if err != nil {
		return nil, err
	}
	top["bgp_neighbors"] = b
	return json.Marshal(top)
}
