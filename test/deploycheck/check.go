package deploycheck

import (
	"context"
	"fmt"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/metal-ccm/cloud-provider-equinix-metal/deploy"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/testenv"
)

// Denied is an API call the CCM's ServiceAccount may not make.
type Denied struct {
	Call testenv.APICall
	// Reason is the authorizer's explanation, often empty for RBAC denials.
	Reason string
}

func (d Denied) String() string {
	c := d.Call
	c.User, c.Code = "", 0 // who and how it went are not what was denied
	s := strings.TrimSpace(c.String())
	if d.Reason != "" {
		s += " (" + d.Reason + ")"
	}
	return s
}

// serviceAccountUser returns the user name and groups the API server gives
// the CCM's ServiceAccount (deploy.ServiceAccountName in deploy.Namespace),
// which RBAC subjects of kind ServiceAccount match. The server adds
// system:authenticated to an authenticated request, not to the user a
// SubjectAccessReview names, so it is listed here.
func serviceAccountUser() (name string, groups []string) {
	return "system:serviceaccount:" + deploy.Namespace + ":" + deploy.ServiceAccountName,
		[]string{"system:serviceaccounts", "system:serviceaccounts:" + deploy.Namespace, "system:authenticated"}
}

// CheckAllowed asks the API server behind kube, with one SubjectAccessReview
// per distinct call, whether the CCM's ServiceAccount (serviceAccountUser,
// whatever User each call names) may make each call, and returns those it
// may not, in the order given. The RBAC objects must already be in the
// server (Install); asking the real authorizer rather than re-implementing
// rule matching means resourceNames, subresources, non-resource URLs and
// the server's bootstrap roles (system:discovery, auth-delegator, ...) count
// exactly as they do for the running CCM.
//
// calls usually come from testenv.CallsBy(testenv.Calls(events), user) of an
// integration test's audit log; calls without a resource are non-resource
// requests checked by Path. kube needs the right to create
// SubjectAccessReviews (an admin has it).
func CheckAllowed(ctx context.Context, kube kubernetes.Interface, calls []testenv.APICall) ([]Denied, error) {
	user, groups := serviceAccountUser()
	type key struct{ verb, group, resource, sub, ns, name, path string }
	verdict := map[key]*Denied{}
	var denied []Denied
	for _, c := range calls {
		k := key{c.Verb, c.APIGroup, c.Resource, c.Subresource, c.Namespace, c.Name, c.Path}
		d, seen := verdict[k]
		if !seen {
			spec := authorizationv1.SubjectAccessReviewSpec{User: user, Groups: groups}
			if c.Resource == "" {
				spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: c.Path, Verb: c.Verb}
			} else {
				spec.ResourceAttributes = &authorizationv1.ResourceAttributes{
					Namespace: c.Namespace, Verb: c.Verb, Group: c.APIGroup,
					Resource: c.Resource, Subresource: c.Subresource, Name: c.Name,
				}
			}
			sar, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx,
				&authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
			if err != nil {
				return nil, fmt.Errorf("deploy: asking whether %s is allowed: %w", c, err)
			}
			if !sar.Status.Allowed {
				reason := sar.Status.Reason
				if sar.Status.EvaluationError != "" {
					reason = strings.TrimSpace(reason + " " + sar.Status.EvaluationError)
				}
				d = &Denied{Call: c, Reason: reason}
			}
			verdict[k] = d
		}
		if d != nil {
			dd := *d
			dd.Call = c
			denied = append(denied, dd)
		}
	}
	return denied, nil
}

// splitResource splits an RBAC resource "services/status" into resource and
// subresource.
func splitResource(r string) (resource, subresource string) {
	resource, subresource, _ = strings.Cut(r, "/")
	return resource, subresource
}
