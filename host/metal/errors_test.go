package metal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
)

func TestResponseMessage(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"error field", `{"error":"metro sv has no public IPv4 available"}`, "metro sv has no public IPv4 available"},
		{"errors list", `{"errors":["a is wrong","b is missing"]}`, "a is wrong, b is missing"},
		{"both", `{"errors":["a"],"error":"b"}`, "a, b"},
		{"plain text", "Service Unavailable\n", "Service Unavailable"},
		{"multi-line html", "<html>\n  <body>bad gateway</body>\n</html>", "<html> <body>bad gateway</body> </html>"},
		{"empty", "", ""},
		{"long text is cut", strings.Repeat("x", 500), strings.Repeat("x", 200) + "…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := responseMessage([]byte(tt.body)); got != tt.want {
				t.Errorf("responseMessage = %q, want %q", got, tt.want)
			}
		})
	}
}

func httpResp(code int, body string, header ...string) *http.Response {
	r := &http.Response{
		StatusCode: code,
		Status:     fmt.Sprintf("%d %s", code, http.StatusText(code)),
		Header:     http.Header{},
		Body:       io.NopCloser(strings.NewReader(body)),
	}
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	return r
}

func TestAPIError(t *testing.T) {
	red := newRedactor(config.Secret(fakeKey))
	tests := []struct {
		name       string
		op         operation
		resp       *http.Response
		err        error
		want       string
		wantCode   int
		wantNotFnd bool
	}{
		{
			name: "422 with the API's message",
			op:   opRequestIP, resp: httpResp(422, `{"errors":["metro sv has no public IPv4 available"]}`), err: errors.New("422 Unprocessable Entity"),
			want:     `request IP reservation: 422 Unprocessable Entity: "metro sv has no public IPv4 available"`,
			wantCode: 422,
		},
		{
			name: "transport error without a response does not panic",
			op:   opGetDevice, resp: nil, err: errors.New(`dial tcp 127.0.0.1:1: connect: connection refused`),
			want: `get device: dial tcp 127.0.0.1:1: connect: connection refused`,
		},
		{
			name: "404 is not found",
			op:   opGetDevice, resp: httpResp(404, `{"errors":["Not found"]}`), err: errors.New("404 Not Found"),
			want: `get device: 404 Not Found: "Not found"`, wantCode: 404, wantNotFnd: true,
		},
		{
			name: "401 says how to fix it and never shows the key",
			op:   opListDevices, resp: httpResp(401, `{"error":"Invalid token `+fakeKey+`"}`), err: errors.New("401"),
			want:     `list project devices: 401 Unauthorized: "Invalid token [redacted]" (check the Equinix Metal API key: apiKey in the cloud-config or METAL_API_KEY)`,
			wantCode: 401,
		},
		{
			name: "429 not retried carries Retry-After",
			op:   opListIPs, resp: httpResp(429, `{"error":"slow down"}`, "Retry-After", "600"), err: errors.New("429"),
			want:     `list IP reservations: 429 Too Many Requests: "slow down" (retry after 10m0s)`,
			wantCode: 429,
		},
		{
			name: "undecodable 200",
			op:   opGetIP, resp: httpResp(200, `{}`), err: errors.New("data failed to match schemas"),
			want: `get IP address: the API answered 200 OK with a body that does not decode: data failed to match schemas`,
		},
		{
			name: "timeout",
			op:   opGetDevice, resp: nil, err: fmt.Errorf("Get x: %w", context.DeadlineExceeded),
			want: `get device: no answer before the deadline (Get x: context deadline exceeded)`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := red.apiError(tt.op, tt.resp, tt.err)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("error = %v\nwant    %s", err, tt.want)
			}
			var e *callError
			if !errors.As(err, &e) || e.StatusCode != tt.wantCode || e.Operation != tt.op.label {
				t.Errorf("Error = %+v, want status %d op %s", e, tt.wantCode, tt.op.label)
			}
			if IsNotFound(err) != tt.wantNotFnd {
				t.Errorf("IsNotFound = %v, want %v", IsNotFound(err), tt.wantNotFnd)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
		})
	}
	if red.apiError(opGetDevice, nil, nil) != nil {
		t.Error("apiError(nil) is not nil")
	}
}

func TestIsNotFound(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("not found"), false},
		{&callError{StatusCode: 404}, true},
		{fmt.Errorf("wrapped: %w", &callError{StatusCode: 404}), true},
		{&callError{StatusCode: 500}, false},
		{&callError{StatusCode: 0, err: context.DeadlineExceeded}, false},
		{&notFoundError{What: "device"}, true},
	}
	for _, tt := range tests {
		if got := IsNotFound(tt.err); got != tt.want {
			t.Errorf("IsNotFound(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}
