package metal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/equinix/equinix-sdk-go/services/metalv1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
)

// operation names one Equinix Metal API operation: label is the value of the
// metrics' operation label, desc starts every error message about it.
type operation struct {
	label string
	desc  string
}

// The API operations this package performs, one per SDK call.
var (
	opGetDevice        = operation{"get_device", "get device"}
	opListDevices      = operation{"list_project_devices", "list project devices"}
	opGetBGPConfig     = operation{"get_project_bgp_config", "get project BGP config"}
	opEnableBGP        = operation{"request_project_bgp_config", "enable project BGP"}
	opCreateBGPSession = operation{"create_bgp_session", "create device BGP session"}
	opListBGPSessions  = operation{"list_bgp_sessions", "list device BGP sessions"}
	opGetBGPNeighbors  = operation{"get_bgp_neighbors", "get device BGP neighbors"}
	opListIPs          = operation{"list_ip_reservations", "list IP reservations"}
	opRequestIP        = operation{"request_ip_reservation", "request IP reservation"}
	opGetIP            = operation{"get_ip", "get IP address"}
	opDeleteIP         = operation{"delete_ip", "delete IP address"}
	opAssignIP         = operation{"create_ip_assignment", "assign IP address"}
)

// callError is what every failed API call returns: a one-line message that names
// the operation and carries the API's own message, never a credential.
//
// StatusCode is the HTTP status, or 0 when no usable answer arrived
// (transport error, timeout, cancelled context, undecodable body). RetryAfter
// is the server's Retry-After on a 429 or 503 that was not retried here
// because it asked for a longer wait than the client allows; a caller can
// requeue after it.
type callError struct {
	Operation  string
	StatusCode int
	RetryAfter time.Duration
	// Message is the API's own text ({"error": …} or {"errors": […]}).
	Message string

	msg string
	err error
}

func (e *callError) Error() string { return e.msg }

// Unwrap gives errors.Is access to context.Canceled, context.DeadlineExceeded
// and the transport's error.
func (e *callError) Unwrap() error { return e.err }

// notFoundError says that the API authoritatively has no such object: a 404
// on a GET, or a complete listing that does not contain it.
type notFoundError struct {
	What string
}

func (e *notFoundError) Error() string { return e.What + " not found" }

// IsNotFound is true only when the API said the object does not exist (HTTP
// 404, or an authoritative listing without it). Timeouts, transport errors,
// 401/403 and 5xx are never "not found", so a caller such as InstanceExists
// does not delete a Node because the API was unreachable.
func IsNotFound(err error) bool {
	var nf *notFoundError
	if errors.As(err, &nf) {
		return true
	}
	var e *callError
	return errors.As(err, &e) && e.StatusCode == http.StatusNotFound
}

// Refused is true when the API refused the request for what it asks (HTTP
// 400 or 422: no addresses of that kind where they were asked for, or not
// for this project), as opposed to failing to answer (5xx, timeouts), to
// rate limiting, or to refusing the API key (401, 403). Callers test it
// through an interface of their own (errors.As), so that their fakes can
// say the same.
func (e *callError) Refused() bool {
	return e.StatusCode == http.StatusBadRequest || e.StatusCode == http.StatusUnprocessableEntity
}

// ErrBGPNotEnabled is returned (wrapped) by ProjectBGPConfig when the project
// has no BGP configuration, or a disabled one.
var ErrBGPNotEnabled = errors.New("BGP is not enabled on the project")

// hints tell the user how to fix what a status code usually means.
var hints = map[int]string{
	http.StatusUnauthorized: "check the Equinix Metal API key: apiKey in the cloud-config or METAL_API_KEY",
	http.StatusForbidden:    "check that the API key may act on the project: projectID in the cloud-config or METAL_PROJECT_ID",
}

// redactor removes credentials from any text that may end up in an error.
// The secrets sit behind a pointer: fmt prints a nested pointer as an
// address, whereas it prints an unexported Secret field without calling its
// redacting Format method, so %+v of a Client would otherwise show the key.
type redactor struct{ secrets *[]config.Secret }

func newRedactor(secrets ...config.Secret) redactor { return redactor{&secrets} }

// with returns a redactor that also hides more secrets.
func (r redactor) with(more ...config.Secret) redactor {
	var all []config.Secret
	if r.secrets != nil {
		all = append(all, *r.secrets...)
	}
	return newRedactor(append(all, more...)...)
}

func (r redactor) clean(s string) string {
	if r.secrets == nil {
		return s
	}
	for _, secret := range *r.secrets {
		if secret != "" {
			s = strings.ReplaceAll(s, secret.Reveal(), "[redacted]")
		}
	}
	return s
}

// apiError turns the SDK's (response, error) pair into an *callError. It never
// dereferences a nil response: a transport error has none.
func (r redactor) apiError(op operation, resp *http.Response, err error) error {
	if err == nil {
		return nil
	}
	e := &callError{Operation: op.label, err: err}
	switch {
	case resp == nil:
		e.msg = fmt.Sprintf("%s: %s", op.desc, describeTransportError(err))
	case resp.StatusCode >= 300:
		e.StatusCode = resp.StatusCode
		e.Message = r.clean(responseMessage(errorBody(resp, err)))
		e.RetryAfter = retryAfter(resp)
		status := resp.Status
		if status == "" {
			status = strconv.Itoa(resp.StatusCode) + " " + http.StatusText(resp.StatusCode)
		}
		e.msg = op.desc + ": " + status
		if e.Message != "" {
			e.msg += ": " + strconv.Quote(e.Message)
		}
		if h := hints[resp.StatusCode]; h != "" {
			e.msg += " (" + h + ")"
		}
		if e.RetryAfter > 0 {
			e.msg += fmt.Sprintf(" (retry after %s)", e.RetryAfter)
		}
	default:
		e.StatusCode = 0
		e.msg = fmt.Sprintf("%s: the API answered %s with a body that does not decode: %v", op.desc, resp.Status, err)
	}
	e.msg = oneLine(r.clean(e.msg))
	return e
}

// describeTransportError words the errors that happen before an HTTP answer.
func describeTransportError(err error) string {
	switch {
	case errors.Is(err, context.Canceled):
		return "cancelled before the API answered"
	case errors.Is(err, context.DeadlineExceeded):
		return "no answer before the deadline (" + err.Error() + ")"
	}
	return err.Error()
}

// errorBody finds the response body: the SDK keeps it in its error and also
// re-buffers it in the response.
func errorBody(resp *http.Response, err error) []byte {
	var ge *metalv1.GenericOpenAPIError
	if errors.As(err, &ge) && len(ge.Body()) > 0 {
		return ge.Body()
	}
	if resp.Body == nil {
		return nil
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return b
}

// responseMessage extracts the API's message from an error body. The API
// answers {"error": "…"} or {"errors": ["…", …]}; anything else is shown as
// text, cut short.
func responseMessage(body []byte) string {
	var m struct {
		Error  string   `json:"error"`
		Errors []string `json:"errors"`
	}
	if json.Unmarshal(body, &m) == nil {
		var parts []string
		parts = append(parts, m.Errors...)
		if m.Error != "" {
			parts = append(parts, m.Error)
		}
		if len(parts) > 0 {
			return oneLine(strings.Join(parts, ", "))
		}
	}
	s := oneLine(strings.TrimSpace(string(body)))
	const max = 200
	if len(s) > max {
		s = s[:max] + "…"
	}
	return s
}

// oneLine keeps messages on a single log line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
