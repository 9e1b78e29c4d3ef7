package testenv

import (
	"reflect"
	"strings"
	"testing"
)

const auditLine1 = `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a1","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/default/services?limit=500","verb":"list","user":{"username":"alice","groups":["system:authenticated"]},"objectRef":{"resource":"services","namespace":"default","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200}}`
const auditWatchStarted = `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"w1","stage":"ResponseStarted","requestURI":"/apis/metallb.io/v1beta1/namespaces/metallb-system/ipaddresspools?watch=true","verb":"watch","user":{"username":"ccm"},"objectRef":{"resource":"ipaddresspools","namespace":"metallb-system","apiGroup":"metallb.io","apiVersion":"v1beta1"},"responseStatus":{"metadata":{},"code":200}}`
const auditWatchDone = `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"w1","stage":"ResponseComplete","requestURI":"/apis/metallb.io/v1beta1/namespaces/metallb-system/ipaddresspools?watch=true","verb":"watch","user":{"username":"ccm"},"objectRef":{"resource":"ipaddresspools","namespace":"metallb-system","apiGroup":"metallb.io","apiVersion":"v1beta1"},"responseStatus":{"metadata":{},"code":200}}`
const auditImpersonated = `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"i1","stage":"ResponseComplete","requestURI":"/api/v1/nodes/n1/status","verb":"patch","user":{"username":"admin"},"impersonatedUser":{"username":"bob"},"objectRef":{"resource":"nodes","name":"n1","subresource":"status","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":403}}`
const auditNonResource = `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"d1","stage":"ResponseComplete","requestURI":"/apis?timeout=32s","verb":"get","user":{"username":"alice"},"responseStatus":{"metadata":{},"code":200}}`

func TestParseAuditLogAndCalls(t *testing.T) {
	log := strings.Join([]string{auditLine1, auditWatchStarted, auditImpersonated, "", auditNonResource, auditWatchDone}, "\n") + "\n" +
		`{"kind":"Event","auditID":"half-writ` // a line still being written
	events, err := parseAuditLog([]byte(log))
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 5 {
		t.Fatalf("got %d events, want 5 (the partial last line is left for later)", len(events))
	}
	got := Calls(events)
	want := []APICall{
		{User: "alice", Verb: "list", APIVersion: "v1", Resource: "services", Namespace: "default", Code: 200},
		{User: "ccm", Verb: "watch", APIGroup: "metallb.io", APIVersion: "v1beta1", Resource: "ipaddresspools", Namespace: "metallb-system", Code: 200},
		{User: "bob", Verb: "patch", APIVersion: "v1", Resource: "nodes", Subresource: "status", Name: "n1", Code: 403},
		{User: "alice", Verb: "get", Path: "/apis", Code: 200},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Calls:\n got %+v\nwant %+v", got, want)
	}
	if by := CallsBy(got, "alice"); len(by) != 2 || by[0].Resource != "services" || by[1].Path != "/apis" {
		t.Fatalf("CallsBy(alice) = %+v", by)
	}
}

func TestParseAuditLogRejectsGarbage(t *testing.T) {
	_, err := parseAuditLog([]byte(auditLine1 + "\nnot json\n"))
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("err = %v, want a complaint about line 2", err)
	}
}

func TestAPICallString(t *testing.T) {
	tests := []struct {
		call APICall
		want string
	}{
		{APICall{User: "alice", Verb: "list", Resource: "services", Namespace: "default", Code: 200}, "alice list services -n default (200)"},
		{APICall{User: "ccm", Verb: "patch", APIGroup: "metallb.io", Resource: "bgppeers", Name: "p1", Namespace: "metallb-system"}, "ccm patch bgppeers.metallb.io p1 -n metallb-system"},
		{APICall{User: "bob", Verb: "update", Resource: "services", Subresource: "status", Name: "lb", Namespace: "ns", Code: 403}, "bob update services/status lb -n ns (403)"},
		{APICall{User: "alice", Verb: "get", Path: "/apis"}, "alice get /apis"},
	}
	for _, tt := range tests {
		if got := tt.call.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
}

func TestAuditEventsNeedsTheOption(t *testing.T) {
	_, err := (&Env{}).AuditEvents()
	if err == nil || !strings.Contains(err.Error(), "set Options.AuditLog") {
		t.Fatalf("err = %v, want a hint to set Options.AuditLog", err)
	}
}
