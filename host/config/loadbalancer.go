package config

import (
	"encoding/hex"
	"fmt"
	"net/url"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/google/go-containerregistry/pkg/name"
	"k8s.io/apimachinery/pkg/api/validate/content"
)

// lbKind is the load-balancer integration picked by the loadbalancer setting.
type lbKind string

const (
	LBNone             lbKind = ""
	LBMetalLBCRD       lbKind = "metallb-crd"       // MetalLB >= 0.13 custom resources
	LBMetalLBConfigMap lbKind = "metallb-configmap" // MetalLB <= 0.12 ConfigMap
	LBKubeVIP          lbKind = "kube-vip"
	LBEmpty            lbKind = "empty"
	LBWasm             lbKind = "wasm" // a user's module file
)

// Defaults of the MetalLB forms, as upstream documents them.
const (
	defaultMetalLBNamespace = "metallb-system"
	defaultMetalLBConfigMap = "config"
)

// LoadBalancer is the parsed loadbalancer URL.
type LoadBalancer struct {
	Kind      lbKind
	Namespace string // MetalLB modes
	ConfigMap string // legacy MetalLB mode
	Path      string // LBWasm: the module file
	SHA256    string // LBWasm: optional pin, lower-case hex
	// OCIRef (LBWasm from wasm+oci://) is registry/repository@sha256:<hex>:
	// the module is pulled by digest (host/ocimodule) into Path at start.
	OCIRef string
	// Options are the query parameters the module receives (all but
	// crdConfiguration, which selects the built-in, and sha256, which pins
	// the file).
	Options map[string]string
}

// ParseLoadBalancer accepts both upstream README versions' forms:
//
//	metallb:///                         CRD mode in metallb-system
//	metallb:///<ns>                     CRD mode in <ns>
//	metallb:///<ns>?crdConfiguration=true
//	metallb:///<ns>/<configmap>         legacy ConfigMap mode
//	metallb:///<ns>/<configmap>?crdConfiguration=true   CRD mode in <ns>, as upstream
//	metallb:///<ns>?crdConfiguration=false   legacy, ConfigMap "config"
//	kube-vip://   empty://
//	wasm:///abs/path/module.wasm[?sha256=<hex>&key=value]
//
// CRD mode is the default for the bare forms because MetalLB <= 0.12, the
// only consumer of the ConfigMap, has long been out of support.
func ParseLoadBalancer(raw string) (LoadBalancer, error) {
	if raw == "" {
		return LoadBalancer{Kind: LBNone}, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return LoadBalancer{}, fmt.Errorf("is not a URL (%v); use the form <type>:///<detail>, for example metallb:///metallb-system", unwrapURLError(err))
	}
	// url.Parse refuses a control character in the raw string but decodes
	// one percent-encoded in the path (%0A); echoed by the messages below,
	// it would split them over lines, and it names no namespace, file or
	// repository anyway.
	if i := strings.IndexFunc(u.Host+u.Path, unicode.IsControl); i >= 0 {
		return LoadBalancer{}, fmt.Errorf("has the control character %q in its path; remove it", []rune((u.Host + u.Path)[i:])[0])
	}
	opts, err := queryOptions(u.RawQuery)
	if err != nil {
		return LoadBalancer{}, err
	}
	switch u.Scheme {
	case "metallb":
		return parseMetalLB(u, opts)
	case "kube-vip", "empty":
		return LoadBalancer{Kind: lbKind(u.Scheme), Options: opts}, nil
	case "wasm":
		return parseFileModule(u, opts)
	case "wasm+oci":
		return parseOCIModule(u, opts)
	case "emlb":
		return LoadBalancer{}, fmt.Errorf("uses emlb://, the Equinix Metal Load Balancer, which this CCM does not support; use metallb:///, kube-vip://, empty://, a wasm:/// module or a wasm+oci:// module")
	case "":
		return LoadBalancer{}, fmt.Errorf("has no type; use <type>:///<detail> with type metallb, kube-vip, empty, wasm or wasm+oci")
	default:
		return LoadBalancer{}, fmt.Errorf("has the unknown type %q; use metallb, kube-vip, empty, wasm or wasm+oci", u.Scheme)
	}
}

// queryOptions turns the query string into the module's options; a repeated
// key is refused rather than silently resolved to one of its values.
func queryOptions(raw string) (map[string]string, error) {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return nil, fmt.Errorf("has a malformed query string: %v", err)
	}
	opts := map[string]string{}
	for key, vals := range q {
		if len(vals) > 1 {
			return nil, fmt.Errorf("repeats the query parameter %q; give it once", key)
		}
		opts[key] = vals[0]
	}
	return opts, nil
}

// parseMetalLB reads metallb:///<ns>[/<configmap>][?crdConfiguration=…].
func parseMetalLB(u *url.URL, opts map[string]string) (LoadBalancer, error) {
	if u.Host != "" {
		return LoadBalancer{}, fmt.Errorf("puts %q in the host part; MetalLB takes the namespace in the path, with three slashes: metallb:///%s", u.Host, strings.TrimPrefix(u.Host+u.Path, "/"))
	}
	lb := LoadBalancer{Kind: LBMetalLBCRD, Namespace: defaultMetalLBNamespace}
	parts := splitPath(u.Path)
	switch len(parts) {
	case 0:
	case 1:
		lb.Namespace = parts[0]
	case 2:
		lb.Kind, lb.Namespace, lb.ConfigMap = LBMetalLBConfigMap, parts[0], parts[1]
	default:
		return LoadBalancer{}, fmt.Errorf("has too many path segments; use metallb:///<namespace> (MetalLB CRDs) or metallb:///<namespace>/<configmap> (MetalLB <= 0.12 ConfigMap)")
	}
	if v, ok := opts["crdConfiguration"]; ok {
		delete(opts, "crdConfiguration")
		crd, err := strconv.ParseBool(v)
		if err != nil {
			return LoadBalancer{}, fmt.Errorf("has crdConfiguration=%q; use true (MetalLB CRDs) or false (MetalLB <= 0.12 ConfigMap)", v)
		}
		switch {
		case crd && lb.Kind == LBMetalLBConfigMap:
			// Upstream runs this in CRD mode and ignores the name;
			// ModeChoice says so at start.
			lb.Kind, lb.ConfigMap = LBMetalLBCRD, ""
		case !crd && lb.Kind == LBMetalLBCRD:
			lb.Kind, lb.ConfigMap = LBMetalLBConfigMap, defaultMetalLBConfigMap
		}
	}
	if errs := content.IsDNS1123Label(lb.Namespace); len(errs) > 0 {
		return LoadBalancer{}, fmt.Errorf("names the namespace %q, which is not a valid namespace name: %s", lb.Namespace, errs[0])
	}
	if lb.ConfigMap != "" {
		if errs := content.IsDNS1123Subdomain(lb.ConfigMap); len(errs) > 0 {
			return LoadBalancer{}, fmt.Errorf("names the ConfigMap %q, which is not a valid object name: %s", lb.ConfigMap, errs[0])
		}
	}
	if v, ok := opts[bgpTypeParam]; ok && !slices.Contains(bgpTypes, v) {
		return LoadBalancer{}, fmt.Errorf("has %s=%q; use native (MetalLB's default), frr or frr-k8s, as MetalLB's speaker runs (its METALLB_BGP_TYPE)", bgpTypeParam, v)
	}
	lb.Options = opts
	return lb, nil
}

// bgpTypeParam says how MetalLB's speakers run, with MetalLB's own values
// (METALLB_BGP_TYPE): it decides whether MetalLB can announce IPv6. The
// MetalLB CRD module reads it too (modules/internal/metallb).
const bgpTypeParam = "bgpType"

var bgpTypes = []string{"native", "frr", "frr-k8s"}

// IPv6Unsupported says why the load-balancer integration cannot announce
// an IPv6 Elastic IP, "" when it can (or, for a user's module, may): the
// CCM then reserves none, and a Service that needs IPv6 is told why in an
// Event. MetalLB announces IPv6 in its FRR modes only, and in native mode
// refuses its whole configuration once an announced pool holds IPv6.
func (lb LoadBalancer) IPv6Unsupported() string {
	switch lb.Kind {
	case LBMetalLBCRD:
		if t := lb.Options[bgpTypeParam]; t == "frr" || t == "frr-k8s" {
			return ""
		}
		return fmt.Sprintf("MetalLB in native BGP mode (the loadbalancer setting has no %s=frr) announces IPv4 only; run MetalLB in FRR mode (v0.16.1 or later) and set the loadbalancer to metallb:///%s?%s=frr", bgpTypeParam, lb.Namespace, bgpTypeParam)
	case LBMetalLBConfigMap:
		return fmt.Sprintf("MetalLB <= 0.12 (the ConfigMap mode) announces IPv4 only; run MetalLB >= 0.16.1 in FRR mode and set the loadbalancer to metallb:///%s?%s=frr", lb.Namespace, bgpTypeParam)
	case LBKubeVIP:
		return "the kube-vip integration gets IPv4 BGP peers only (the node annotations kube-vip reads); IPv6 needs another load balancer, such as MetalLB in FRR mode (metallb:///metallb-system?bgpType=frr)"
	}
	return ""
}

// parseFileModule reads wasm:///<absolute path>.wasm[?sha256=<hex>&…].
func parseFileModule(u *url.URL, opts map[string]string) (LoadBalancer, error) {
	if u.Host != "" {
		return LoadBalancer{}, fmt.Errorf("puts %q in the host part; a module is named by its absolute path, with three slashes: wasm:///etc/ccm/modules/mine.wasm", u.Host)
	}
	p := path.Clean(u.Path)
	if u.Path == "" || p == "/" || !strings.HasSuffix(p, ".wasm") {
		return LoadBalancer{}, fmt.Errorf("does not name a .wasm file; use wasm:///<absolute path>.wasm, for example wasm:///etc/ccm/modules/mine.wasm")
	}
	lb := LoadBalancer{Kind: LBWasm, Path: p}
	if v, ok := opts["sha256"]; ok {
		delete(opts, "sha256")
		b, err := hex.DecodeString(v)
		if err != nil || len(b) != 32 {
			return LoadBalancer{}, fmt.Errorf("has sha256=%q, which is not 64 hexadecimal digits; use the output of sha256sum <module>.wasm", v)
		}
		lb.SHA256 = strings.ToLower(v)
	}
	lb.Options = opts
	return lb, nil
}

// ModeChoice is the start-up log line that says which MetalLB mode raw
// selects and why, naming the URL that selects the other mode: the two
// upstream READMEs disagree on the bare metallb:///<ns> (the newer says
// ConfigMap, the older CRDs, upstream v3.8.1's code picks the ConfigMap),
// so a user switching must be able to see which one they got. Empty for
// the other kinds and for a URL that does not parse.
func ModeChoice(raw string) string {
	lb, err := ParseLoadBalancer(raw)
	if err != nil || (lb.Kind != LBMetalLBCRD && lb.Kind != LBMetalLBConfigMap) {
		return ""
	}
	u, _ := url.Parse(raw)
	crd, given := u.Query()["crdConfiguration"]
	named := len(splitPath(u.Path)) == 2
	ns := lb.Namespace
	switch {
	case lb.Kind == LBMetalLBCRD && given && named:
		return fmt.Sprintf("MetalLB custom resources in namespace %s, because of crdConfiguration=%s; the ConfigMap name %q in the URL is ignored, as upstream ignores it. For the MetalLB <= 0.12 ConfigMap use metallb:///%s/%s", ns, crd[0], splitPath(u.Path)[1], ns, splitPath(u.Path)[1])
	case lb.Kind == LBMetalLBCRD && given:
		return fmt.Sprintf("MetalLB custom resources in namespace %s, because of crdConfiguration=%s. For the MetalLB <= 0.12 ConfigMap use metallb:///%s/%s", ns, crd[0], ns, defaultMetalLBConfigMap)
	case lb.Kind == LBMetalLBCRD:
		return fmt.Sprintf("MetalLB custom resources in namespace %s: the URL names no ConfigMap and has no crdConfiguration, and MetalLB <= 0.12 (the ConfigMap's only reader) is out of support; upstream v3.8.1 used the ConfigMap %s/%s for this URL. For the MetalLB <= 0.12 ConfigMap use metallb:///%s/%s or metallb:///%s?crdConfiguration=false", ns, ns, defaultMetalLBConfigMap, ns, defaultMetalLBConfigMap, ns)
	case given:
		return fmt.Sprintf("MetalLB <= 0.12 ConfigMap %s/%s, because of crdConfiguration=%s. For MetalLB custom resources use metallb:///%s?crdConfiguration=true", ns, lb.ConfigMap, crd[0], ns)
	default:
		return fmt.Sprintf("MetalLB <= 0.12 ConfigMap %s/%s, because the URL names it. For MetalLB custom resources use metallb:///%s?crdConfiguration=true", ns, lb.ConfigMap, ns)
	}
}

// String is the canonical form, for logs.
func (lb LoadBalancer) String() string {
	var b strings.Builder
	switch lb.Kind {
	case LBNone:
		return "none"
	case LBMetalLBCRD:
		fmt.Fprintf(&b, "metallb:///%s?crdConfiguration=true", lb.Namespace)
	case LBMetalLBConfigMap:
		fmt.Fprintf(&b, "metallb:///%s/%s", lb.Namespace, lb.ConfigMap)
	case LBWasm:
		if lb.OCIRef != "" {
			fmt.Fprintf(&b, "wasm+oci://%s", lb.OCIRef)
			break
		}
		fmt.Fprintf(&b, "wasm://%s", lb.Path)
	default:
		fmt.Fprintf(&b, "%s://", lb.Kind)
	}
	keys := make([]string, 0, len(lb.Options))
	for k := range lb.Options {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	sep := "?"
	if strings.Contains(b.String(), "?") {
		sep = "&"
	}
	for _, k := range keys {
		fmt.Fprintf(&b, "%s%s=%s", sep, url.QueryEscape(k), url.QueryEscape(lb.Options[k]))
		sep = "&"
	}
	return b.String()
}

func splitPath(p string) []string {
	var parts []string
	for _, s := range strings.Split(p, "/") {
		if s != "" {
			parts = append(parts, s)
		}
	}
	return parts
}

func unwrapURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// parseOCIModule reads wasm+oci://<registry>/<repository>@sha256:<hex>. A
// tag is refused: what runs must not change when someone pushes.
func parseOCIModule(u *url.URL, opts map[string]string) (LoadBalancer, error) {
	ref := u.Host + u.Path
	repo, digest, ok := strings.Cut(ref, "@")
	if u.Host == "" || strings.Trim(u.Path, "/") == "" {
		return LoadBalancer{}, fmt.Errorf("does not name a registry and repository; use wasm+oci://<registry>/<repository>@sha256:<digest>")
	}
	if !ok {
		return LoadBalancer{}, fmt.Errorf("is not pinned by digest; a tag can change under the CCM, so name the module by digest: wasm+oci://%s@sha256:<digest> (make module-image prints it; crane digest <ref> finds it)", u.Host+tagless(u.Path))
	}
	hexDigest, ok := strings.CutPrefix(digest, "sha256:")
	if b, err := hex.DecodeString(hexDigest); !ok || err != nil || len(b) != 32 {
		return LoadBalancer{}, fmt.Errorf("has the digest %q; want sha256: and 64 hexadecimal digits", digest)
	}
	if _, ok := opts["sha256"]; ok {
		return LoadBalancer{}, fmt.Errorf("has sha256= as well as a digest; the digest pins the module already, drop sha256=")
	}
	ref = repo + "@sha256:" + strings.ToLower(hexDigest)
	// The reference is parsed again, by go-containerregistry, when
	// host/ocimodule pulls the module, and that parser refuses what the
	// checks above let through (an upper-case or empty repository path
	// component, a malformed registry): such a setting must be refused
	// here, at start, as one line naming it, not found at the pull.
	d, err := name.NewDigest(ref)
	if err != nil {
		return LoadBalancer{}, fmt.Errorf("names the module %q, which is not a registry and repository (%v); use wasm+oci://<registry>/<repository>@sha256:<digest>, with the repository in lower case", ref, err)
	}
	// That parser lets a malformed registry through (::), which the pull
	// then fails to make its first URL of: refuse what it cannot.
	if _, err := url.Parse("https://" + d.RegistryStr() + "/v2/"); err != nil {
		return LoadBalancer{}, fmt.Errorf("names the registry %q, which is not a host name or address with an optional port (%v); use wasm+oci://<registry>/<repository>@sha256:<digest>", d.RegistryStr(), unwrapURLError(err))
	}
	return LoadBalancer{Kind: LBWasm, OCIRef: ref, Options: opts}, nil
}

// tagless is the repository path without a trailing :tag.
func tagless(p string) string {
	if i := strings.LastIndex(p, ":"); i > strings.LastIndex(p, "/") {
		return p[:i]
	}
	return p
}
