package eip

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	cloudapi "k8s.io/cloud-provider/api"
)

// Event reasons of a Service's IP families.
const (
	// ReasonFamilyUnsupported: the Service requires an IPv6 address, which
	// this CCM does not give (yet); it gets no address.
	ReasonFamilyUnsupported = "IPFamilyUnsupported"
	// ReasonIPv4Only: the Service prefers dual-stack and gets its IPv4
	// address only.
	ReasonIPv4Only = "IPv4OnlyElasticIP"
)

// familyVerdict is what the CCM does with a Service's spec.ipFamilies and
// spec.ipFamilyPolicy while it gives IPv4 Elastic IPs only: serve (IPv4, as
// for every Service before dual-stack), serve and say that the IPv6 half is
// missing (PreferDualStack), or refuse (the Service cannot work without
// IPv6). Pure: Ensure records the Event and returns the error.
type familyVerdict struct {
	refuse error  // non-nil: no address for the Service
	note   string // non-empty: served, but only IPv4; the Event's message
	warn   bool   // the note is a Warning: the Service needs what it lacks
}

// checkFamilies decides for svc. A Service that already has an address
// keeps it: a RequireDualStack Service served IPv4 by an earlier release
// loses nothing, and is told what is missing.
func checkFamilies(svc *v1.Service) familyVerdict {
	fams := svc.Spec.IPFamilies
	wantsV4 := len(fams) == 0 || slices.Contains(fams, v1.IPv4Protocol)
	wantsV6 := slices.Contains(fams, v1.IPv6Protocol)
	policy := v1.IPFamilyPolicySingleStack
	if p := svc.Spec.IPFamilyPolicy; p != nil {
		policy = *p
	}
	if !wantsV6 && policy != v1.IPFamilyPolicyRequireDualStack && policy != v1.IPFamilyPolicyPreferDualStack {
		return familyVerdict{}
	}
	const fix = "this CCM gives IPv4 Elastic IPs only, for now"
	missing := ""
	switch {
	case !wantsV4:
		missing = fmt.Sprintf("the Service's spec.ipFamilies is %v (no IPv4): %s; create the Service with spec.ipFamilies [IPv4] (or ipFamilyPolicy PreferDualStack in a dual-stack cluster)", fams, fix)
	case policy == v1.IPFamilyPolicyRequireDualStack:
		missing = fmt.Sprintf("the Service's spec.ipFamilyPolicy is RequireDualStack: %s; set ipFamilyPolicy to PreferDualStack (it then gets its IPv4 address) or SingleStack", fix)
	default:
		return familyVerdict{note: fmt.Sprintf("the Service prefers dual-stack (spec.ipFamilyPolicy PreferDualStack); it gets an IPv4 Elastic IP only: %s", fix)}
	}
	if len(previous(svc)) > 0 {
		return familyVerdict{note: "the Service keeps the address it has, but " + missing, warn: true}
	}
	return familyVerdict{refuse: cloudapi.NewRetryError(missing, invalidIPRetry)}
}

// applyFamilies records what checkFamilies decided on svc and returns the
// error that stops Ensure, if any.
func (m *Manager) applyFamilies(svc *v1.Service) error {
	v := checkFamilies(svc)
	switch {
	case v.refuse != nil:
		m.recorder.Eventf(svc, v1.EventTypeWarning, ReasonFamilyUnsupported, "%v", v.refuse)
		return v.refuse
	case v.warn:
		m.recorder.Eventf(svc, v1.EventTypeWarning, ReasonFamilyUnsupported, "%s", v.note)
	case v.note != "":
		m.recorder.Eventf(svc, v1.EventTypeNormal, ReasonIPv4Only, "%s", v.note)
	}
	return nil
}
