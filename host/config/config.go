// Package config loads the CCM's settings from four layers — command-line
// flag, METAL_* environment variable, field of the JSON cloud-config file
// (the cloud-sa.json key of the Secret), built-in default — and validates
// them in one pass.
//
// The names are those of the upstream cloud-provider-equinix-metal, so an
// existing Secret and Deployment keep working: JSON field names match
// case-insensitively (projectID and projectId are the same field) and an
// empty environment variable counts as unset. Secrets have no flag: a key on
// a command line ends up in shell history and `ps`.
//
// Like every package under host/, it belongs to this repository alone:
// its API carries no compatibility promise to code outside it.
package config

import (
	"time"

	"k8s.io/apimachinery/pkg/labels"
)

// Config is the validated configuration. Derived fields (LB, NodeSelector)
// are parsed once here so that no other package re-parses or re-validates.
type Config struct {
	APIKey    Secret `key:"apiKey"`
	ProjectID string `key:"projectID"`
	Metro     string `key:"metro"`
	Facility  string `key:"facility"`
	BaseURL   string `key:"base-url"`

	LoadBalancer string `key:"loadbalancer"`
	// LB is LoadBalancer parsed; Kind is LBNone when load balancing is off.
	LB LoadBalancer

	LocalASN uint32 `key:"localASN"`
	BGPPass  Secret `key:"bgpPass"`

	AnnotationLocalASN string `key:"annotationLocalASN"`
	AnnotationPeerASN  string `key:"annotationPeerASN"`
	AnnotationPeerIP   string `key:"annotationPeerIP"`
	AnnotationSrcIP    string `key:"annotationSrcIP"`
	AnnotationBGPPass  string `key:"annotationBGPPass"`
	// AnnotateBGPPass writes the password annotation at all; kube-vip
	// reads it, but anyone who can read Nodes can then read the password.
	AnnotateBGPPass bool `key:"annotateBGPPass"`
	// ReadinessAddress is where /readyz is served; empty serves none.
	ReadinessAddress             string `key:"readinessAddress"`
	AnnotationNetworkIPv4Private string `key:"annotationNetworkIPv4Private"`
	AnnotationEIPMetro           string `key:"annotationEIPMetro"`
	AnnotationEIPFacility        string `key:"annotationEIPFacility"`

	EIPTag                  string `key:"eipTag"`
	APIServerPort           int    `key:"apiServerPort"`
	BGPNodeSelector         string `key:"bgpNodeSelector"`
	EIPHealthCheckUseHostIP bool   `key:"eipHealthCheckUseHostIP"`
	// NodeSelector is BGPNodeSelector parsed; labels.Everything() when empty.
	NodeSelector labels.Selector

	// Options below are new in this CCM; upstream has no equivalent.

	PolicyDir            string        `key:"policyDir"`
	ModuleCacheDir       string        `key:"moduleCacheDir"`
	ModuleMemoryLimitMiB int           `key:"moduleMemoryLimitMiB"`
	ModuleTimeout        time.Duration `key:"moduleTimeout"`
	APITimeout           time.Duration `key:"apiTimeout"`
	APIRetries           int           `key:"apiRetries"`
	APIQPS               float64       `key:"apiQPS"`
	APIBurst             int           `key:"apiBurst"`
	CacheRefreshPeriod   time.Duration `key:"cacheRefreshPeriod"`
	HealthCheckInterval  time.Duration `key:"healthCheckInterval"`
	HealthCheckTimeout   time.Duration `key:"healthCheckTimeout"`
	HealthCheckFailures  int           `key:"healthCheckFailures"`
	BGPMaxPrefixes       int           `key:"bgpMaxPrefixes"`
	// BGPMaxPrefixesAction is what happens to a new Service Elastic IP once
	// BGPMaxPrefixes are announced: prefixesWarn or PrefixesRefuse.
	BGPMaxPrefixesAction string `key:"bgpMaxPrefixesAction"`
	// BGPHoldTime and BGPKeepaliveTime are the BGP timers the speakers
	// use (zero: the speaker's default); the load-balancer module gets
	// them as its holdTime and keepaliveTime options (timers.go).
	BGPHoldTime      time.Duration `key:"bgpHoldTime"`
	BGPKeepaliveTime time.Duration `key:"bgpKeepaliveTime"`
	// BGPBFDInterval and BGPBFDMultiplier turn BFD on for the FRR-based
	// speakers (zero interval: off; zero multiplier: the speaker's 3); the
	// module gets them as its bfdInterval and bfdMultiplier options.
	BGPBFDInterval   time.Duration `key:"bgpBFDInterval"`
	BGPBFDMultiplier int           `key:"bgpBFDMultiplier"`
	// OrphanEIPs is what to do with this cluster's Service reservations
	// whose Service is gone: orphanReport ("report", the default) or
	// OrphanRelease ("release").
	OrphanEIPs     string        `key:"orphanEIPs"`
	OrphanEIPGrace time.Duration `key:"orphanEIPGrace"`
	// NodeExternalIPv6 lists each node's public IPv6 as an ExternalIP
	// (instances.Options).
	NodeExternalIPv6 bool `key:"nodeExternalIPv6"`

	// Warnings are problems that do not stop the CCM (unknown fields in the
	// cloud-config file); the caller logs them.
	Warnings []string
}

// The values of orphanEIPs.
const (
	orphanReport  = "report"
	OrphanRelease = "release"
)

// The values of bgpMaxPrefixesAction. Equinix Metal's router drops a BGP
// session that announces more prefixes than the project's limit, and with
// it every Service address of the node (upstream issue #457): warn reserves
// the Elastic IP and warns on each BGP node; refuse reserves none past the
// limit, so one Service goes without an address instead of every Service
// of the node going dark.
const (
	prefixesWarn   = "warn"
	PrefixesRefuse = "refuse"
)

// DefaultBaseURL is the production Equinix Metal API.
const DefaultBaseURL = "https://api.equinix.com/metal/v1"

// option describes one setting in every layer. The table below is the single
// place where names and defaults live: flags, env lookup, JSON lookup, the
// table of docs/reference/configuration.md and the defaults layer are all
// derived from it.
type option struct {
	key   string // JSON field name in cloud-sa.json, and the koanf key
	env   string // environment variable; "" when there is none
	flag  string // command-line flag; "" for secrets
	def   string // default in the same text form a user would write
	usage string
	// secret options never have their value echoed, not even in errors.
	secret bool
	// required options have no default; leaving them unset is an error.
	required bool
}

// Annotation templates: {{n}} is replaced with the peer's index.
const (
	DefaultAnnotationLocalASN = "metal.equinix.com/bgp-peers-{{n}}-node-asn"
	DefaultAnnotationPeerASN  = "metal.equinix.com/bgp-peers-{{n}}-peer-asn"
	DefaultAnnotationPeerIP   = "metal.equinix.com/bgp-peers-{{n}}-peer-ip"
	DefaultAnnotationSrcIP    = "metal.equinix.com/bgp-peers-{{n}}-src-ip"
	DefaultAnnotationBGPPass  = "metal.equinix.com/bgp-peers-{{n}}-bgp-pass"
)

var options = []option{
	{key: "apiKey", env: "METAL_API_KEY", secret: true, required: true,
		usage: "Equinix Metal API key"},
	{key: "projectID", env: "METAL_PROJECT_ID", flag: "metal-project-id", required: true,
		usage: "Equinix Metal project ID"},
	{key: "metro", env: "METAL_METRO_NAME", flag: "metal-metro",
		usage: "metro in which to request Service Elastic IPs (wins over the Service annotation)"},
	{key: "facility", env: "METAL_FACILITY_NAME", flag: "metal-facility",
		usage: "facility in which to request Service Elastic IPs (wins over metro and the Service annotations)"},
	{key: "base-url", env: "METAL_BASE_URL", flag: "metal-base-url", def: DefaultBaseURL,
		usage: "base URL of the Equinix Metal API"},
	{key: "loadbalancer", env: "METAL_LOAD_BALANCER", flag: "metal-load-balancer",
		usage: "load-balancer integration: metallb:///<ns>, metallb:///<ns>/<configmap>, kube-vip://, empty://, wasm:///<path>.wasm or wasm+oci://<registry>/<repository>@sha256:<digest>; empty disables load balancing"},
	{key: "localASN", env: "METAL_LOCAL_ASN", flag: "metal-local-asn", def: "65000",
		usage: "BGP ASN of the nodes when this CCM enables BGP on the project (an existing project ASN wins)"},
	{key: "bgpPass", env: "METAL_BGP_PASS", secret: true,
		usage: "BGP MD5 password when this CCM enables BGP on the project (an existing project password wins)"},
	{key: "annotationLocalASN", env: "METAL_ANNOTATION_LOCAL_ASN", flag: "metal-annotation-local-asn", def: DefaultAnnotationLocalASN,
		usage: "node annotation for the node's BGP ASN; {{n}} is the peer index"},
	{key: "annotationPeerASN", env: "METAL_ANNOTATION_PEER_ASN", flag: "metal-annotation-peer-asn", def: DefaultAnnotationPeerASN,
		usage: "node annotation for the BGP peer's ASN; {{n}} is the peer index"},
	{key: "annotationPeerIP", env: "METAL_ANNOTATION_PEER_IP", flag: "metal-annotation-peer-ip", def: DefaultAnnotationPeerIP,
		usage: "node annotation for the BGP peer's IP; {{n}} is the peer index"},
	{key: "annotationSrcIP", env: "METAL_ANNOTATION_SRC_IP", flag: "metal-annotation-src-ip", def: DefaultAnnotationSrcIP,
		usage: "node annotation for the BGP source IP; {{n}} is the peer index"},
	{key: "annotationBGPPass", env: "METAL_ANNOTATION_BGP_PASS", flag: "metal-annotation-bgp-pass", def: DefaultAnnotationBGPPass,
		usage: "node annotation for the base64 BGP password; {{n}} is the peer index"},
	{key: "annotationNetworkIPv4Private", env: "METAL_ANNOTATION_NETWORK_IPV4_PRIVATE", flag: "metal-annotation-network-ipv4-private", def: "metal.equinix.com/network-4-private",
		usage: "node annotation for the CIDR of the node's private IPv4 network"},
	{key: "annotationEIPMetro", env: "METAL_ANNOTATION_EIP_METRO", flag: "metal-annotation-eip-metro", def: "metal.equinix.com/eip-metro",
		usage: "Service annotation that picks the metro of its Elastic IP"},
	{key: "annotationEIPFacility", env: "METAL_ANNOTATION_EIP_FACILITY", flag: "metal-annotation-eip-facility", def: "metal.equinix.com/eip-facility",
		usage: "Service annotation that picks the facility of its Elastic IP"},
	{key: "eipTag", env: "METAL_EIP_TAG", flag: "metal-eip-tag",
		usage: "tag of the control-plane Elastic IP; empty disables control-plane EIP management"},
	{key: "apiServerPort", env: "METAL_API_SERVER_PORT", flag: "metal-api-server-port", def: "0",
		usage: "port of the control-plane EIP; 0 uses the kube-apiserver's port from default/kubernetes"},
	{key: "bgpNodeSelector", env: "METAL_BGP_NODE_SELECTOR", flag: "metal-bgp-node-selector",
		usage: "label selector of the nodes that get BGP (for example key1=value1,key2 in (a,b)); empty selects all nodes"},
	{key: "eipHealthCheckUseHostIP", env: "METAL_EIP_HEALTH_CHECK_USE_HOST_IP", flag: "metal-eip-health-check-use-host-ip", def: "false",
		usage: "probe each control-plane node's own address instead of the EIP"},

	{key: "policyDir", env: "METAL_POLICY_DIR", flag: "metal-policy-dir",
		usage: "directory of Rego policies replacing the built-in placement and BGP-selection policies; empty uses the built-ins"},
	{key: "moduleCacheDir", env: "METAL_MODULE_CACHE_DIR", flag: "metal-module-cache-dir",
		usage: "directory for compiled load-balancer modules; empty keeps them in memory only"},
	{key: "moduleMemoryLimitMiB", env: "METAL_MODULE_MEMORY_LIMIT_MIB", flag: "metal-module-memory-limit-mib", def: "96",
		usage: "memory limit of one load-balancer module call, in MiB"},
	{key: "moduleTimeout", env: "METAL_MODULE_TIMEOUT", flag: "metal-module-timeout", def: "15s",
		usage: "deadline of one load-balancer module call"},
	{key: "apiTimeout", env: "METAL_API_TIMEOUT", flag: "metal-api-timeout", def: "30s",
		usage: "timeout of one Equinix Metal API request"},
	{key: "apiRetries", env: "METAL_API_RETRIES", flag: "metal-api-retries", def: "4",
		usage: "retries of a failed idempotent Equinix Metal API request"},
	{key: "apiQPS", env: "METAL_API_QPS", flag: "metal-api-qps", def: "20",
		usage: "sustained Equinix Metal API requests per second for the whole process"},
	{key: "apiBurst", env: "METAL_API_BURST", flag: "metal-api-burst", def: "100",
		usage: "Equinix Metal API requests allowed at once above --metal-api-qps (a burst of new Services is served from it)"},
	{key: "cacheRefreshPeriod", env: "METAL_CACHE_REFRESH_PERIOD", flag: "metal-cache-refresh-period", def: "5m",
		usage: "how often the device and IP-reservation caches are re-read in full"},
	{key: "healthCheckInterval", env: "METAL_HEALTH_CHECK_INTERVAL", flag: "metal-health-check-interval", def: "2s",
		usage: "period of the control-plane EIP health probe"},
	{key: "healthCheckTimeout", env: "METAL_HEALTH_CHECK_TIMEOUT", flag: "metal-health-check-timeout", def: "1s",
		usage: "timeout of one control-plane health probe"},
	{key: "healthCheckFailures", env: "METAL_HEALTH_CHECK_FAILURES", flag: "metal-health-check-failures", def: "3",
		usage: "consecutive failed probes before the control-plane EIP moves"},
	{key: "bgpMaxPrefixes", env: "METAL_BGP_MAX_PREFIXES", flag: "metal-bgp-max-prefixes", def: "10",
		usage: "prefixes a BGP session may announce (a node announces the Elastic IPs of its metro) before the CCM warns, or refuses new Elastic IPs with bgpMaxPrefixesAction=refuse (Equinix's default session limit is 10)"},
	{key: "bgpMaxPrefixesAction", env: "METAL_BGP_MAX_PREFIXES_ACTION", flag: "metal-bgp-max-prefixes-action", def: prefixesWarn,
		usage: "what a new Service Elastic IP past bgpMaxPrefixes gets: warn (reserved; a warning Event on each BGP node over it) or refuse (not reserved; a warning Event on the Service)"},
	{key: "bgpHoldTime", env: "METAL_BGP_HOLD_TIME", flag: "metal-bgp-hold-time", def: "0s",
		usage: "BGP hold time of every session the load balancer's speakers open (whole seconds, 3s to 65535s; 0s: the speaker's default, MetalLB's 90s): how long the routers keep sending a dead node traffic; the module gets it as its holdTime option"},
	{key: "bgpKeepaliveTime", env: "METAL_BGP_KEEPALIVE_TIME", flag: "metal-bgp-keepalive-time", def: "0s",
		usage: "BGP keepalive interval of those sessions (whole seconds, shorter than the hold time; 0s: a third of the hold time); the module gets it as its keepaliveTime option"},
	{key: "bgpBFDInterval", env: "METAL_BGP_BFD_INTERVAL", flag: "metal-bgp-bfd-interval", def: "0s",
		usage: "BFD on those sessions: the interval at which each side sends and expects a BFD packet (whole milliseconds, 10ms to 60s; 0s: no BFD); a dead node is out of the routers' paths after bgpBFDMultiplier intervals. MetalLB in FRR mode or with FRR-K8s runs it; the module gets it as its bfdInterval option"},
	{key: "bgpBFDMultiplier", env: "METAL_BGP_BFD_MULTIPLIER", flag: "metal-bgp-bfd-multiplier", def: "0",
		usage: "BFD packets missed in a row before a peer is down (2 to 255; 0: the speaker's default, 3); needs bgpBFDInterval; the module gets it as its bfdMultiplier option"},
	{key: "readinessAddress", env: "METAL_READINESS_ADDRESS", flag: "metal-readiness-address",
		usage: "address (host:port) of /readyz and /livez over plain HTTP (Kubernetes' health format), for the Deployment's readiness probe; empty serves none"},
	{key: "orphanEIPs", env: "METAL_ORPHAN_EIPS", flag: "metal-orphan-eips", def: orphanReport,
		usage: "what to do with this cluster's Service Elastic IPs whose Service no longer exists: report (a metric and a log line) or release (after orphanEIPGrace)"},
	{key: "orphanEIPGrace", env: "METAL_ORPHAN_EIP_GRACE", flag: "metal-orphan-eip-grace", def: "30m",
		usage: "how long a Service Elastic IP must stay orphaned before orphanEIPs=release releases it, so a Service being recreated keeps its address"},
	{key: "nodeExternalIPv6", env: "METAL_NODE_EXTERNAL_IPV6", flag: "metal-node-external-ipv6", def: "false",
		usage: "list each node's public IPv6 as an ExternalIP (upstream lists none): for a dual-stack cluster whose kubelets name no IPv6 --node-ip; a change of a node's addresses restarts kube-proxy on it"},
	{key: "annotateBGPPass", env: "METAL_ANNOTATE_BGP_PASS", flag: "metal-annotate-bgp-pass", def: "true",
		usage: "write the base64 BGP password into each BGP node's annotationBGPPass annotations (kube-vip reads them); false removes them from the nodes"},
}

// optionByKey finds an option by its canonical key.
func optionByKey(key string) (option, bool) {
	for _, o := range options {
		if o.key == key {
			return o, true
		}
	}
	return option{}, false
}
