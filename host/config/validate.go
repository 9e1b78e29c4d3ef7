package config

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

// peerIndex is the placeholder in annotation templates: the SDK's, since
// the SDK renders and matches the annotations.
const peerIndex = sdk.Placeholder

// validate checks cross-field rules and ranges and fills the parsed fields.
// source names where an option's value came from; failed lists the options
// that did not parse, which were already reported.
func validate(c *Config, source func(option) string, failed map[string]bool) []string {
	v := &validator{source: source, failed: failed}
	v.required(c)
	if u, err := url.Parse(c.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		v.add("base-url", "%q is not an http(s) URL; use for example %s", c.BaseURL, DefaultBaseURL)
	}
	lb, err := ParseLoadBalancer(c.LoadBalancer)
	if err != nil {
		v.add("loadbalancer", "%q %v", c.LoadBalancer, err)
	}
	c.LB = lb
	v.bgp(c)
	v.bgpTimers(c)
	v.bgpBFD(c)
	v.annotations(c)
	if c.APIServerPort < 0 || c.APIServerPort > 65535 {
		v.add("apiServerPort", "%d is not a port; use a port between 1 and 65535, or 0 for the kube-apiserver's own port", c.APIServerPort)
	}
	sel, err := labels.Parse(c.BGPNodeSelector)
	if err != nil {
		v.add("bgpNodeSelector", "%q is not a label selector (%v); use for example key1=value1,key2 in (a,b),!key3", c.BGPNodeSelector, err)
		sel = labels.Nothing()
	}
	c.NodeSelector = sel
	v.durations(c)
	v.limits(c)
	return v.problems
}

// validator collects problems, each naming its option and where the value
// came from.
type validator struct {
	source   func(option) string
	failed   map[string]bool
	problems []string
}

// add reports a problem with the option key, unless its value did not even
// parse (that was reported already).
func (v *validator) add(key, format string, args ...any) {
	if v.failed[key] {
		return
	}
	o, _ := optionByKey(key)
	v.problems = append(v.problems, fmt.Sprintf("%s (%s): %s", key, v.source(o), fmt.Sprintf(format, args...)))
}

// required checks the options without a default.
func (v *validator) required(c *Config) {
	if c.APIKey == "" {
		v.problems = append(v.problems, `apiKey is required: set METAL_API_KEY or "apiKey" in the cloud-config file (--cloud-config)`)
	}
	if c.ProjectID == "" {
		v.problems = append(v.problems, `projectID is required: set METAL_PROJECT_ID, --metal-project-id or "projectID" in the cloud-config file (--cloud-config)`)
	}
}

// bgp checks the ASN, the password and the per-peer annotation templates.
func (v *validator) bgp(c *Config) {
	if c.LocalASN == 0 {
		v.add("localASN", "0 is not an ASN; use a number between 1 and 4294967295")
	}
	// bgpPass is checked by bgp.EnableProject, only when this CCM sets it:
	// a project whose BGP is already enabled keeps its own password.

	templates := []struct{ key, value string }{
		{"annotationLocalASN", c.AnnotationLocalASN},
		{"annotationPeerASN", c.AnnotationPeerASN},
		{"annotationPeerIP", c.AnnotationPeerIP},
		{"annotationSrcIP", c.AnnotationSrcIP},
		{"annotationBGPPass", c.AnnotationBGPPass},
	}
	seen := map[string]string{}
	for _, t := range templates {
		if !strings.Contains(t.value, peerIndex) {
			v.add(t.key, "%q lacks %s; a node has one annotation per BGP peer, so the name needs the peer index, for example %s", t.value, peerIndex, defaultOf(t.key))
			continue
		}
		// The SDK renders every {{n}} but matches a name at the first
		// one only (sdk.AnnotationTemplates.IsPeerAnnotation), so the
		// annotations of a template with two would never be recognised
		// as the CCM's: never removed when a peer goes away, and
		// writable by a module.
		if strings.Count(t.value, peerIndex) > 1 {
			v.add(t.key, "%q has %s more than once; use it once, for example %s", t.value, peerIndex, defaultOf(t.key))
			continue
		}
		if errs := content.IsLabelKey(strings.ReplaceAll(t.value, peerIndex, "0")); len(errs) > 0 {
			v.add(t.key, "%q is not a valid annotation name: %s", t.value, errs[0])
			continue
		}
		if other, dup := seen[t.value]; dup {
			v.add(t.key, "%q is the same as %s; each BGP annotation needs its own name", t.value, other)
		}
		seen[t.value] = t.key
	}
	// The multihop annotation's name is derived from the peer IP's
	// (sdk.AnnotationTemplates.MultiHop), 7 characters longer: it must be
	// a valid name too, and no other template's.
	mh := sdk.AnnotationTemplates{PeerIP: c.AnnotationPeerIP}.MultiHop()
	if mh == "" || strings.Count(mh, peerIndex) != 1 {
		return
	}
	if errs := content.IsLabelKey(strings.ReplaceAll(mh, peerIndex, "0")); len(errs) > 0 {
		v.add("annotationPeerIP", "%q gives the peer's multihop annotation the name %q, which is not a valid annotation name: %s; use a shorter name, for example %s", c.AnnotationPeerIP, mh, errs[0], defaultOf("annotationPeerIP"))
	} else if other, dup := seen[mh]; dup {
		v.add(other, "%q is the name of the peer's multihop annotation (from annotationPeerIP); each BGP annotation needs its own name", mh)
	}
}

// annotations checks the single (not per-peer) annotation names.
func (v *validator) annotations(c *Config) {
	for _, a := range []struct{ key, value string }{
		{"annotationNetworkIPv4Private", c.AnnotationNetworkIPv4Private},
		{"annotationEIPMetro", c.AnnotationEIPMetro},
		{"annotationEIPFacility", c.AnnotationEIPFacility},
	} {
		if errs := content.IsLabelKey(a.value); len(errs) > 0 {
			v.add(a.key, "%q is not a valid annotation name: %s", a.value, errs[0])
		}
	}
}

// durations checks that timeouts and periods are positive and that probes
// cannot overlap.
func (v *validator) durations(c *Config) {
	positive := func(key string, d time.Duration) {
		if d <= 0 {
			v.add(key, "%s is not a positive duration; use for example %s", d, defaultOf(key))
		}
	}
	positive("moduleTimeout", c.ModuleTimeout)
	positive("apiTimeout", c.APITimeout)
	positive("cacheRefreshPeriod", c.CacheRefreshPeriod)
	positive("healthCheckInterval", c.HealthCheckInterval)
	positive("healthCheckTimeout", c.HealthCheckTimeout)
	if c.OrphanEIPGrace < 0 {
		v.add("orphanEIPGrace", "%s is negative; use a duration such as %s", c.OrphanEIPGrace, defaultOf("orphanEIPGrace"))
	}
	if c.HealthCheckTimeout > 0 && c.HealthCheckInterval > 0 && c.HealthCheckTimeout > c.HealthCheckInterval {
		v.add("healthCheckTimeout", "%s is longer than healthCheckInterval %s; probes would overlap, so make it shorter", c.HealthCheckTimeout, c.HealthCheckInterval)
	}
}

// limits checks the numeric ranges.
func (v *validator) limits(c *Config) {
	if c.ModuleMemoryLimitMiB < 4 || c.ModuleMemoryLimitMiB > 4096 {
		v.add("moduleMemoryLimitMiB", "%d is out of range; use between 4 and 4096 (a Go module needs at least 4 MiB)", c.ModuleMemoryLimitMiB)
	}
	if c.APIRetries < 0 || c.APIRetries > 20 {
		v.add("apiRetries", "%d is out of range; use between 0 and 20", c.APIRetries)
	}
	if c.APIQPS <= 0 {
		v.add("apiQPS", "%v is too small; use a number greater than 0", c.APIQPS)
	}
	if c.APIBurst < 1 {
		v.add("apiBurst", "%d is too small; use at least 1", c.APIBurst)
	}
	if c.HealthCheckFailures < 1 {
		v.add("healthCheckFailures", "%d is too small; use at least 1", c.HealthCheckFailures)
	}
	if c.OrphanEIPs != orphanReport && c.OrphanEIPs != OrphanRelease {
		v.add("orphanEIPs", "%q is not an option; use %s or %s", c.OrphanEIPs, orphanReport, OrphanRelease)
	}
	if c.BGPMaxPrefixes < 1 {
		v.add("bgpMaxPrefixes", "%d is too small; use at least 1", c.BGPMaxPrefixes)
	}
	if c.BGPMaxPrefixesAction != prefixesWarn && c.BGPMaxPrefixesAction != PrefixesRefuse {
		v.add("bgpMaxPrefixesAction", "%q is not an option; use %s or %s", c.BGPMaxPrefixesAction, prefixesWarn, PrefixesRefuse)
	}
}

func defaultOf(key string) string {
	o, _ := optionByKey(key)
	return o.def
}
