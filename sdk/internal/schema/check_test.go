package schema

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// obj decodes a JSON object as the host does (numbers as json.Number).
func obj(t testing.TB, s string) map[string]any {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("%v: %s", err, s)
	}
	return m
}

const (
	cmHead   = `"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"foo","namespace":"lb"}`
	poolHead = `"apiVersion":"metallb.io/v1beta1","kind":"IPAddressPool","metadata":{"name":"p","namespace":"metallb-system"}`
	peerHead = `"apiVersion":"metallb.io/v1beta2","kind":"BGPPeer","metadata":{"name":"n-0","namespace":"metallb-system"}`
	secHead  = `"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"lb"}`
	dsHead   = `"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"name":"d","namespace":"lb"}`
)

func TestCheck(t *testing.T) {
	mib := strings.Repeat("x", MaxDataBytes)
	b64 := func(n int) string { return base64.StdEncoding.EncodeToString(make([]byte, n)) }
	for _, tc := range []struct {
		name string
		obj  string
		want string // "" accepted; otherwise the whole error
	}{
		// ConfigMap (v1, from Kubernetes' OpenAPI) and its own rules.
		{"configmap", `{` + cmHead + `,"data":{"ip":"1.2.3.4","config.yaml":"a: b"},"binaryData":{"b":"AAE="},"immutable":false}`, ""},
		{"configmap number in data", `{` + cmHead + `,"data":{"ip":5}}`, "data.ip: must be a string, got number"},
		{"configmap number in data, dotted key", `{` + cmHead + `,"data":{"config.yaml":true}}`, `data["config.yaml"]: must be a string, got boolean`},
		{"configmap data not a map", `{` + cmHead + `,"data":["a"]}`, "data: must be an object, got array"},
		{"configmap unknown field", `{` + cmHead + `,"spec":{}}`, "spec: unknown field"},
		{"configmap null data value", `{` + cmHead + `,"data":{"a":null}}`, ""},
		{"configmap bad base64", `{` + cmHead + `,"binaryData":{"b":"not base64!"}}`, "binaryData.b: must be base64 (standard alphabet, padded): illegal base64 data at input byte 3"},
		{"configmap bad key", `{` + cmHead + `,"data":{"a b":"x"}}`, `data["a b"]: invalid key: must consist of alphanumeric characters, '-', '_' or '.'`},
		{"configmap key ..", `{` + cmHead + `,"data":{"..a":"x"}}`, `data["..a"]: invalid key: must not start with '..'`},
		{"configmap key in both", `{` + cmHead + `,"data":{"a":"x"},"binaryData":{"a":"AA=="}}`, "data.a: is in binaryData too; a key may be in one of them only"},
		{"configmap data at the limit", `{` + cmHead + `,"data":{"a":"` + mib + `"}}`, ""},
		{"configmap data over the limit", `{` + cmHead + `,"data":{"a":"` + mib + `","b":"x"}}`, "data and binaryData total 1048577 bytes, over the API server's limit of 1048576 (1 MiB); split it into several ConfigMaps"},
		{"configmap binaryData counted decoded", `{` + cmHead + `,"binaryData":{"a":"` + b64(MaxDataBytes) + `"}}`, ""},
		{"configmap binaryData over the limit", `{` + cmHead + `,"data":{"a":"x"},"binaryData":{"b":"` + b64(MaxDataBytes) + `"}}`, "data and binaryData total 1048577 bytes, over the API server's limit of 1048576 (1 MiB); split it into several ConfigMaps"},

		// Secret: base64 data, stringData merged, the type's keys.
		{"secret basic-auth", `{` + secHead + `,"type":"kubernetes.io/basic-auth","data":{"password":"cHc="}}`, ""},
		{"secret basic-auth from stringData", `{` + secHead + `,"type":"kubernetes.io/basic-auth","stringData":{"username":"u"}}`, ""},
		{"secret basic-auth without keys", `{` + secHead + `,"type":"kubernetes.io/basic-auth","data":{"other":"cHc="}}`, "data: a Secret of type kubernetes.io/basic-auth needs username or password (or both)"},
		{"secret tls without key", `{` + secHead + `,"type":"kubernetes.io/tls","data":{"tls.crt":"eA=="}}`, `data["tls.key"]: required by a Secret of this type, but missing`},
		{"secret dockerconfigjson not JSON", `{` + secHead + `,"type":"kubernetes.io/dockerconfigjson","stringData":{".dockerconfigjson":"{"}}`, `data[".dockerconfigjson"]: must be a JSON object for a Secret of this type: unexpected end of JSON input`},
		{"secret data not base64", `{` + secHead + `,"data":{"password":"fake-bgp-password"}}`, "data.password: must be base64 (standard alphabet, padded): illegal base64 data at input byte 4"},
		{"secret over the limit", `{` + secHead + `,"data":{"a":"` + b64(MaxDataBytes-1) + `"},"stringData":{"b":"xy"}}`, "data: values total 1048577 bytes (stringData included), over the API server's limit of 1048576 (1 MiB)"},
		{"secret stringData overrides data", `{` + secHead + `,"data":{"a":"` + b64(MaxDataBytes) + `"},"stringData":{"a":"xy"}}`, ""},

		// MetalLB's CRDs.
		{"pool", `{` + poolHead + `,"spec":{"addresses":["145.40.1.6/32"],"autoAssign":false,"serviceAllocation":{"namespaces":["a"],"serviceSelectors":[{"matchLabels":{"k":"v"}}]}}}`, ""},
		{"pool addresses a string", `{` + poolHead + `,"spec":{"addresses":"145.40.1.6/32"}}`, "spec.addresses: must be an array, got string"},
		{"pool address a number", `{` + poolHead + `,"spec":{"addresses":[1]}}`, "spec.addresses[0]: must be a string, got number"},
		{"pool address null", `{` + poolHead + `,"spec":{"addresses":[null]}}`, "spec.addresses[0]: must be a string, got null"},
		{"pool without spec", `{` + poolHead + `}`, "spec: required, but missing"},
		{"pool spec null", `{` + poolHead + `,"spec":null}`, "spec: required, but missing"},
		{"pool without addresses", `{` + poolHead + `,"spec":{"autoAssign":false}}`, "spec.addresses: required, but missing"},
		{"pool null member dropped", `{` + poolHead + `,"spec":{"addresses":[],"autoAssign":null}}`, ""},
		{"pool unknown field", `{` + poolHead + `,"spec":{"addresses":[],"autoassign":false}}`, "spec.autoassign: unknown field"},
		{"pool unknown field deep", `{` + poolHead + `,"spec":{"addresses":[],"serviceAllocation":{"serviceSelectors":[{"matchLabel":{}}]}}}`, "spec.serviceAllocation.serviceSelectors[0].matchLabel: unknown field"},
		{"pool label value not a string", `{` + poolHead + `,"spec":{"addresses":[],"serviceAllocation":{"serviceSelectors":[{"matchLabels":{"kubernetes.io/x":1}}]}}}`, `spec.serviceAllocation.serviceSelectors[0].matchLabels["kubernetes.io/x"]: must be a string, got number`},
		{"peer", `{` + peerHead + `,"spec":{"myASN":65000,"peerASN":65530,"peerAddress":"169.254.255.1","peerPort":179,"sourceAddress":"10.66.0.1","passwordSecret":{"name":"p","namespace":"metallb-system"},"nodeSelectors":[{"matchLabels":{"kubernetes.io/hostname":"w"}}]}}`, ""},
		{"peer without myASN", `{` + peerHead + `,"spec":{"peerASN":65530,"peerAddress":"169.254.255.1"}}`, "spec.myASN: required, but missing"},
		{"peer v1beta1 without peerAddress", `{"apiVersion":"metallb.io/v1beta1","kind":"BGPPeer","metadata":{"name":"n"},"spec":{"myASN":1,"peerASN":2}}`, "spec.peerAddress: required, but missing"},
		{"peer ASN over the maximum", `{` + peerHead + `,"spec":{"myASN":4294967296}}`, "spec.myASN: must be at most 4294967295, got 4294967296"},
		{"peer ASN under the minimum", `{` + peerHead + `,"spec":{"myASN":-1}}`, "spec.myASN: must be at least 0, got -1"},
		{"peer ASN a fraction", `{` + peerHead + `,"spec":{"myASN":1.5}}`, "spec.myASN: must be an integer, got 1.5"},
		{"peer ASN integral float", `{` + peerHead + `,"spec":{"myASN":65000.0}}`, ""},
		{"peer ASN a string", `{` + peerHead + `,"spec":{"myASN":"65000"}}`, "spec.myASN: must be an integer, got string"},
		{"peer port over the maximum", `{` + peerHead + `,"spec":{"myASN":1,"peerPort":20000}}`, "spec.peerPort: must be at most 16384, got 20000"},
		{"peer dynamicASN enum", `{` + peerHead + `,"spec":{"myASN":1,"dynamicASN":"both"}}`, `spec.dynamicASN: must be one of "internal", "external", got "both"`},
		{"peer matchExpressions values minItems", `{` + peerHead + `,"spec":{"myASN":1,"nodeSelectors":[{"matchExpressions":[{"key":"k","operator":"In","values":[]}]}]}}`, ""},
		{"advertisement", `{"apiVersion":"metallb.io/v1beta1","kind":"BGPAdvertisement","metadata":{"name":"a"},"spec":{"ipAddressPools":["a","b"],"communities":["65535:65282"],"aggregationLength":32}}`, ""},
		{"advertisement pools not a list", `{"apiVersion":"metallb.io/v1beta1","kind":"BGPAdvertisement","metadata":{"name":"a"},"spec":{"ipAddressPools":{"a":"b"}}}`, "spec.ipAddressPools: must be an array, got object"},
		// CRD CEL rules (x-kubernetes-validations), as the API server
		// evaluates them.
		{"peer connectTime", `{` + peerHead + `,"spec":{"myASN":1,"connectTime":"5s"}}`, ""},
		{"peer connectTime in minutes", `{` + peerHead + `,"spec":{"myASN":1,"connectTime":"2m"}}`, ""},
		{"peer connectTime zero", `{` + peerHead + `,"spec":{"myASN":1,"connectTime":"0s"}}`, `spec.connectTime: connect time should be between 1 seconds to 65535 (the CRD's rule "duration(self).getSeconds() >= 1 && duration(self).getSeconds() <= 65535")`},
		{"peer connectTime over the maximum", `{` + peerHead + `,"spec":{"myASN":1,"connectTime":"65536s"}}`, `spec.connectTime: connect time should be between 1 seconds to 65535 (the CRD's rule "duration(self).getSeconds() >= 1 && duration(self).getSeconds() <= 65535")`},
		{"peer connectTime a fraction", `{` + peerHead + `,"spec":{"myASN":1,"connectTime":"1500ms"}}`, `spec.connectTime: connect time should contain a whole number of seconds (the CRD's rule "duration(self).getMilliseconds() % 1000 == 0")`},
		{"peer connectTime not a duration", `{` + peerHead + `,"spec":{"myASN":1,"connectTime":"soon"}}`, `spec.connectTime: the CRD's rule "duration(self).getSeconds() >= 1 && duration(self).getSeconds() <= 65535" failed to evaluate: type conversion error from 'string' to 'google.protobuf.Duration'`},
		// A rule on the stored object (oldSelf) needs an update to
		// evaluate: not here.
		{"peer enableGracefulRestart, a transition rule", `{` + peerHead + `,"spec":{"myASN":1,"enableGracefulRestart":true}}`, ""},
		{"advertisement serviceSelectors, default aggregation", `{"apiVersion":"metallb.io/v1beta1","kind":"BGPAdvertisement","metadata":{"name":"a"},"spec":{"serviceSelectors":[{"matchLabels":{"app":"web"}}],"aggregationLength":32}}`, ""},
		{"advertisement serviceSelectors and aggregation", `{"apiVersion":"metallb.io/v1beta1","kind":"BGPAdvertisement","metadata":{"name":"a"},"spec":{"serviceSelectors":[{"matchLabels":{"app":"web"}}],"aggregationLengthV6":64}}`, `spec: serviceSelectors and aggregationLength are mutually exclusive, can only be used together with default aggregationLength (32) and aggregationLengthV6 (128) (the CRD's rule "!has(self.serviceSelectors) || self.serviceSelectors.size() == 0 || ((!has(self.aggregationLength) || self.aggregationLength == 32) && (!has(self.aggregationLengthV6) || self.aggregationLengthV6 == 128))")`},
		{"bfd profile over the maximum", `{"apiVersion":"metallb.io/v1beta1","kind":"BFDProfile","metadata":{"name":"b"},"spec":{"detectMultiplier":300}}`, "spec.detectMultiplier: must be at most 255, got 300"},
		{"status-only kind, closed spec", `{"apiVersion":"metallb.io/v1beta1","kind":"ServiceL2Status","metadata":{"name":"s"},"spec":{"x":1}}`, "spec.x: unknown field"},

		// Built-in kinds beyond ConfigMap and Secret: the types the API
		// server decodes itself, list types, and the rules of workloads.go.
		{"lease micro-time", `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"l"},"spec":{"renewTime":"2026-11-29T10:00:00.000000Z"}}`, ""},
		{"lease micro-time without microseconds", `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"l"},"spec":{"renewTime":"2026-11-29T10:00:00Z"}}`, `spec.renewTime: must be a time in RFC 3339 form with microseconds (2006-01-02T15:04:05.000000Z): parsing time "2026-11-29T10:00:00Z" as "2006-01-02T15:04:05.000000Z07:00": cannot parse "Z" as ".000000"`},
		{"lease duration over int32", `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"l"},"spec":{"leaseDurationSeconds":2147483648}}`, "spec.leaseDurationSeconds: must fit in a 32-bit integer, got 2147483648"},
		{"event date-time", `{"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{"name":"e"},"eventTime":"2026-11-29T10:00:00.000000Z","deprecatedFirstTimestamp":"2026-11-29T10:00:00Z"}`, ""},
		{"event date-time not RFC 3339", `{"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{"name":"e"},"eventTime":"2026-11-29T10:00:00.000000Z","deprecatedFirstTimestamp":"29 Nov 2026"}`, `deprecatedFirstTimestamp: must be a time in RFC 3339 form (2006-01-02T15:04:05Z): parsing time "29 Nov 2026" as "2006-01-02T15:04:05Z07:00": cannot parse "29 Nov 2026" as "2006"`},
		{"job", `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j"},"spec":{"template":{"spec":{"containers":[{"name":"c","image":"i"}],"restartPolicy":"Never"}},"activeDeadlineSeconds":60}}`, ""},
		{"quantity", `{` + dsHead + `,"spec":{"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"c","resources":{"limits":{"memory":"1.5Gi","cpu":0.5}}}]}}}}`, ""},
		{"quantity not one", `{` + dsHead + `,"spec":{"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"c","resources":{"limits":{"memory":"lots"}}}]}}}}`, `spec.template.spec.containers[0].resources.limits.memory: must be a quantity (such as 100m, 1.5, 64Mi or 1e3): no digits before the suffix`},
		{"quantity a boolean", `{` + dsHead + `,"spec":{"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"c","resources":{"limits":{"memory":true}}}]}}}}`, `spec.template.spec.containers[0].resources.limits.memory: must be a string or a number, got boolean`},
		{"containers of one name", `{` + dsHead + `,"spec":{"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"c"},{"name":"c"}]}}}}`, `spec.template.spec.containers[1]: duplicates item 0: the same name (["c"])`},
		{"ports of one number, protocol defaulted", `{` + dsHead + `,"spec":{"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"c","ports":[{"containerPort":80},{"containerPort":80,"protocol":"TCP"}]}]}}}}`, `spec.template.spec.containers[0].ports[1]: duplicates item 0: the same containerPort, protocol ([80,"TCP"])`},
		{"workload without containers", `{` + dsHead + `,"spec":{"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},"spec":{}}}}`, "spec.template.spec.containers: required, but missing"},
		{"workload with no container", `{` + dsHead + `,"spec":{"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[]}}}}`, "spec.template.spec.containers: required, but missing: a pod template needs at least one container"},
		{"workload selector not the template's", `{` + dsHead + `,"spec":{"selector":{"matchExpressions":[{"key":"a","operator":"In","values":["c"]}]},"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"c"}]}}}}`, "spec.template.metadata.labels: the selector does not select the template's labels"},
		{"workload maxUnavailable not a percentage", `{` + dsHead + `,"spec":{"selector":{"matchLabels":{"a":"b"}},"updateStrategy":{"rollingUpdate":{"maxUnavailable":"10"}},"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"c"}]}}}}`, `spec.updateStrategy.rollingUpdate.maxUnavailable: must be an integer or a percentage such as "25%", got "10"`},
		{"service without ports", `{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},"spec":{"type":"LoadBalancer"}}`, "spec.ports: required, but missing: a LoadBalancer Service needs at least one port"},
		{"headless service without ports", `{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},"spec":{"clusterIP":"None"}}`, ""},
		{"service traffic policy on ClusterIP", `{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},"spec":{"ports":[{"port":80}],"externalTrafficPolicy":"Local"}}`, "spec.externalTrafficPolicy: may only be set for a NodePort or LoadBalancer Service, not ClusterIP"},
		{"service target port int or string", `{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},"spec":{"ports":[{"port":80,"targetPort":"http"},{"port":81,"targetPort":8081}]}}`, ""},
		{"rolebinding to a ClusterRole", `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"r"},"roleRef":{"kind":"ClusterRole","name":"view"}}`, ""},
		{"clusterrolebinding to a Role", `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding","metadata":{"name":"r"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"view"}}`, `roleRef.kind: must be one of "ClusterRole", got "Role"`},
		{"endpointslice without addressType", `{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"e"},"endpoints":[]}`, "addressType: required, but missing"},
		{"pdb percentage", `{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","metadata":{"name":"p"},"spec":{"minAvailable":"50%"}}`, ""},

		// Every kind: annotations and the whole object.
		{"annotations at the limit", `{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"t","annotations":{"a":"` + strings.Repeat("x", MaxAnnotationBytes-1) + `"}}}`, ""},
		{"annotations over the limit", `{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"t","annotations":{"a":"` + strings.Repeat("x", MaxAnnotationBytes) + `"}}}`, "metadata.annotations: total 262145 bytes of keys and values, over the API server's limit of 262144 (256 KiB)"},
		{"unknown kind, anything goes", `{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"t"},"spec":{"x":[1,null,{"y":true}]}}`, ""},
		{"unknown kind over etcd's limit", `{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"t"},"spec":{"a":"` + strings.Repeat("x", MaxObjectBytes) + `"}}`, "is at least 1572950 bytes as JSON, over etcd's default request limit of 1572864 bytes (1.5 MiB); split it into smaller objects"},
		{"pool over etcd's limit", `{` + poolHead + `,"spec":{"addresses":["` + strings.Repeat("x", MaxObjectBytes) + `"]}}`, "is at least 1573001 bytes as JSON, over etcd's default request limit of 1572864 bytes (1.5 MiB); split it into smaller objects"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(apiVersionKind(t, tc.obj))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("accepted, want %q", tc.want)
			case tc.want != "" && err.Error() != tc.want:
				t.Fatalf("got  %q\nwant %q", err, tc.want)
			}
		})
	}
}

func apiVersionKind(t testing.TB, s string) (string, string, map[string]any) {
	o := obj(t, s)
	av, _ := o["apiVersion"].(string)
	k, _ := o["kind"].(string)
	return av, k, o
}

// TestCheckGoValues: an object built in Go rather than decoded (a test
// calling ValidateOutput) is checked as the JSON the host would send.
func TestCheckGoValues(t *testing.T) {
	md := map[string]any{"name": "foo", "namespace": "lb"}
	for _, tc := range []struct {
		data any
		want string
	}{
		{map[string]string{"a": "b"}, ""},
		{map[string]any{"ip": 5}, "data.ip: must be a string, got number"},
		{map[string]any{"ip": 1.5}, "data.ip: must be a string, got number"},
		{map[string]any{"ip": []string{"x"}}, "data.ip: must be a string, got array"},
		{map[string]any{"ip": struct{ A int }{1}}, "data.ip: must be a string, got object"},
		{map[string]any{"ip": make(chan int)}, "data.ip: holds a Go chan int, which does not encode as JSON"},
	} {
		err := Check("v1", "ConfigMap", map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": md, "data": tc.data})
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("%#v: got %q, want %q", tc.data, got, tc.want)
		}
	}
}

// TestCheckSizeIsALowerBound: the size the walk counts never exceeds the
// object's real JSON encoding, so the etcd limit never refuses what fits.
func TestCheckSizeIsALowerBound(t *testing.T) {
	for _, s := range []string{
		`{` + peerHead + `,"spec":{"myASN":65000,"peerASN":65530,"peerAddress":"169.254.255.1","nodeSelectors":[{"matchLabels":{"kubernetes.io/hostname":"w"}}]}}`,
		`{` + cmHead + `,"data":{"a":"line\nbreak \"quoted\" ü","b":""},"binaryData":{}}`,
		`{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"t"},"spec":{"x":[1,null,{"y":true,"z":false}],"e":[],"o":{}}}`,
	} {
		o := obj(t, s)
		w := walker{}
		if !w.check(o["apiVersion"].(string), o["kind"].(string), o, Lookup(o["apiVersion"].(string), o["kind"].(string))) {
			t.Fatalf("refused: %v", w.err)
		}
		enc, _ := json.Marshal(o)
		if w.size > len(enc) || w.size < len(enc)-16 {
			t.Errorf("counted %d bytes, the JSON has %d: %s", w.size, len(enc), enc)
		}
	}
}

// TestCheckNamesTheSameProblemEveryTime: of several problems in one
// object, the error names the first in key order, whatever the map order.
func TestCheckNamesTheSameProblemEveryTime(t *testing.T) {
	o := obj(t, `{`+cmHead+`,"data":{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8}}`)
	for range 50 {
		if err := Check("v1", "ConfigMap", o); err == nil || err.Error() != "data.a: must be a string, got number" {
			t.Fatalf("got %v", err)
		}
	}
}

// TestKeywords covers the keywords the embedded schemas do not use today,
// on schemas made here.
func TestKeywords(t *testing.T) {
	n := func(v int) *int { return &v }
	f := func(v float64) *float64 { return &v }
	s := &Schema{Type: "object", Properties: map[string]*Schema{
		"ios":    {IntOrString: true},
		"name":   {Type: "string", MinLength: n(2), MaxLength: n(3), Pattern: "^[a-zé]+$"},
		"list":   {Type: "array", MaxItems: n(1), Items: &Schema{Type: "string", Nullable: true}},
		"labels": {Type: "object", MinProperties: n(1), MaxProperties: n(1), AdditionalProperties: &Schema{Type: "string"}},
		"free":   {Type: "object", PreserveUnknownFields: true, Properties: map[string]*Schema{"known": {Type: "boolean"}}},
		"ratio":  {Type: "number", Minimum: f(0), Maximum: f(1), ExclusiveMaximum: true},
		"opt":    {Type: "string", Nullable: true},
	}}
	if err := compile(s); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ obj, want string }{
		{`{"ios":5,"name":"éa","list":[null],"labels":{"a":"b"},"free":{"known":true,"other":[1]},"ratio":0.5,"opt":null}`, ""},
		{`{"ios":"50%"}`, ""},
		{`{"ios":true}`, "ios: must be an integer or a string, got boolean"},
		{`{"ios":null}`, ""},
		{`{"ios":1.5}`, "ios: must be an integer or a string, got 1.5"},
		{`{"name":"a"}`, "name: must be at least 2 characters, got 1"},
		{`{"name":"ééé"}`, ""}, // characters, not bytes
		{`{"name":"abcd"}`, "name: must be at most 3 characters, got 4"},
		{`{"name":"AB"}`, `name: must match the pattern "^[a-zé]+$", got "AB"`},
		{`{"list":["a","b"]}`, "list: must have at most 1 items, got 2"},
		{`{"labels":{}}`, "labels: must have at least 1 members, got 0"},
		{`{"labels":{"a":"b","c":"d"}}`, "labels: must have at most 1 members, got 2"},
		{`{"free":{"known":1}}`, "free.known: must be a boolean, got number"},
		{`{"ratio":1}`, "ratio: must be less than 1, got 1"},
		{`{"ratio":-0.5}`, "ratio: must be at least 0, got -0.5"},
		{`{"ratio":"1"}`, "ratio: must be a number, got string"},
	} {
		w := walker{sorted: true}
		w.check("example.com/v1", "Test", obj(t, tc.obj), s)
		got := ""
		if w.err != nil {
			got = w.err.Error()
		}
		if got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.obj, got, tc.want)
		}
	}
}

// TestEmbeddedSchemas: the files load (unknown keywords refused) and hold
// the kinds the host promises to check.
func TestEmbeddedSchemas(t *testing.T) {
	if err := loadAll(); err != nil {
		t.Fatal(err)
	}
	got := Kinds()
	for _, k := range []string{
		"v1/ConfigMap", "v1/Secret", "v1/Service", "v1/ServiceAccount", "apps/v1/DaemonSet", "apps/v1/Deployment",
		"rbac.authorization.k8s.io/v1/Role", "rbac.authorization.k8s.io/v1/RoleBinding", "coordination.k8s.io/v1/Lease",
		"discovery.k8s.io/v1/EndpointSlice",
		"metallb.io/v1beta1/IPAddressPool", "metallb.io/v1beta1/BGPAdvertisement", "metallb.io/v1beta1/L2Advertisement",
		"metallb.io/v1beta1/Community", "metallb.io/v1beta1/BFDProfile", "metallb.io/v1beta1/BGPPeer", "metallb.io/v1beta2/BGPPeer",
	} {
		if !slices.Contains(got, k) {
			t.Errorf("no schema of %s (have %v)", k, got)
		}
	}
}
