package policy

import (
	"maps"
	"sort"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// The input documents below are the policy contract of ARCHITECTURE.md; the JSON
// names are what a policy reads (input.service.namespace, ...), and
// policies/README.md shows them. Changing a name breaks users' policies.

// Service is the part of a Kubernetes Service a placement policy sees
// (input.service): PlacementInput.Service, made from a Kubernetes Service
// by ServiceFromKubernetes. Its JSON names are the policy contract.
type Service struct {
	Namespace   string            `json:"namespace"`
	Name        string            `json:"name"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// Node is a cluster node as both policies see it. Metro and Facility are
// the Equinix Metal location of the node's device, empty when unknown.
type Node struct {
	Name       string            `json:"name"`
	Labels     map[string]string `json:"labels"`
	ProviderID string            `json:"providerID"`
	Metro      string            `json:"metro"`
	Facility   string            `json:"facility"`
}

// PlacementConfig is the CCM configuration a placement policy needs: the
// global location settings (empty when unset) and the names of the Service
// annotations that ask for a location.
type PlacementConfig struct {
	Metro                 string `json:"metro"`
	Facility              string `json:"facility"`
	AnnotationEIPMetro    string `json:"annotationEIPMetro"`
	AnnotationEIPFacility string `json:"annotationEIPFacility"`
}

// Requirement is one parsed requirement of the bgpNodeSelector setting.
// Operator is named as in k8s.io/apimachinery/pkg/selection: "=", "==",
// "!=", "in", "notin", "exists", "!", "gt", "lt".
type Requirement struct {
	Key      string   `json:"key"`
	Operator string   `json:"operator"`
	Values   []string `json:"values"`
}

// PlacementInput is input of data.equinix.eip.placement. Nodes and
// BGPNodeSelector are there so that a policy can place an EIP near the
// nodes that announce it (see examples/policies/eip-majority-metro).
type PlacementInput struct {
	Service Service `json:"service"`
	// Family is the address family of the Elastic IP being placed, "IPv4"
	// or "IPv6": a dual-stack Service is placed once per family.
	Family          string          `json:"family"`
	Config          PlacementConfig `json:"config"`
	Nodes           []Node          `json:"nodes"`
	BGPNodeSelector []Requirement   `json:"bgpNodeSelector"`
}

// SelectionInput is input of data.equinix.bgp.selected_nodes: every node of
// the cluster, evaluated in one go.
type SelectionInput struct {
	Nodes           []Node        `json:"nodes"`
	BGPNodeSelector []Requirement `json:"bgpNodeSelector"`
}

// Labels of a node that carry its Equinix Metal location. The CCM sets the
// region to the device's metro; the zone is set by whoever labels nodes with
// the facility (upstream leaves it empty).
const (
	labelMetro    = corev1.LabelTopologyRegion
	labelFacility = corev1.LabelTopologyZone
)

// NodeFromKubernetes is the policy view of a Kubernetes Node, with the
// location read from its topology labels. A caller that knows the device's
// location better (from the Equinix Metal API) overwrites Metro/Facility.
func NodeFromKubernetes(n *corev1.Node) Node {
	return Node{
		Name:       n.Name,
		Labels:     n.Labels,
		ProviderID: n.Spec.ProviderID,
		Metro:      n.Labels[labelMetro],
		Facility:   n.Labels[labelFacility],
	}
}

// ServiceFromKubernetes is the policy view of a Kubernetes Service.
func ServiceFromKubernetes(s *corev1.Service) Service {
	return Service{Namespace: s.Namespace, Name: s.Name, Labels: s.Labels, Annotations: s.Annotations}
}

// SelectorRequirements lists the requirements of an already parsed selector
// (config.Config.NodeSelector), in the parser's (sorted) order.
func SelectorRequirements(sel labels.Selector) []Requirement {
	reqs, _ := sel.Requirements()
	out := make([]Requirement, 0, len(reqs))
	for _, r := range reqs {
		values := r.ValuesUnsorted()
		sort.Strings(values)
		out = append(out, Requirement{Key: r.Key(), Operator: string(r.Operator()), Values: values})
	}
	return out
}

// The converters below build OPA's AST values directly instead of handing
// OPA Go structs: rego.EvalInput would round-trip them through JSON, which
// costs more than the evaluation itself for thousands of nodes.

func (in PlacementInput) value(nc *nodeCache) ast.Value {
	return ast.NewObject(
		ast.Item(ast.InternedTerm("service"), in.Service.term()),
		ast.Item(ast.InternedTerm("family"), ast.StringTerm(in.Family)),
		ast.Item(ast.InternedTerm("config"), in.Config.term()),
		ast.Item(ast.InternedTerm("nodes"), nodesOnly(nc.terms(in.Nodes))),
		ast.Item(ast.InternedTerm("bgpNodeSelector"), requirementsTerm(in.BGPNodeSelector)),
	)
}

func nodesOnly(t *ast.Term, _ map[string]cachedNode) *ast.Term { return t }

// value also returns the names of the nodes (a read-only map), so that
// the decision can be checked against them without building another one.
func (in SelectionInput) value(nc *nodeCache) (ast.Value, map[string]cachedNode) {
	nodes, names := nc.terms(in.Nodes)
	return ast.NewObject(
		ast.Item(ast.InternedTerm("nodes"), nodes),
		ast.Item(ast.InternedTerm("bgpNodeSelector"), requirementsTerm(in.BGPNodeSelector)),
	), names
}

func (s Service) term() *ast.Term {
	return ast.ObjectTerm(
		ast.Item(ast.InternedTerm("namespace"), ast.StringTerm(s.Namespace)),
		ast.Item(ast.InternedTerm("name"), ast.StringTerm(s.Name)),
		ast.Item(ast.InternedTerm("labels"), stringMapTerm(s.Labels)),
		ast.Item(ast.InternedTerm("annotations"), stringMapTerm(s.Annotations)),
	)
}

func (c PlacementConfig) term() *ast.Term {
	return ast.ObjectTerm(
		ast.Item(ast.InternedTerm("metro"), ast.StringTerm(c.Metro)),
		ast.Item(ast.InternedTerm("facility"), ast.StringTerm(c.Facility)),
		ast.Item(ast.InternedTerm("annotationEIPMetro"), ast.StringTerm(c.AnnotationEIPMetro)),
		ast.Item(ast.InternedTerm("annotationEIPFacility"), ast.StringTerm(c.AnnotationEIPFacility)),
	)
}

func (n Node) term() *ast.Term {
	return ast.ObjectTerm(
		ast.Item(ast.InternedTerm("name"), ast.StringTerm(n.Name)),
		ast.Item(ast.InternedTerm("labels"), stringMapTerm(n.Labels)),
		ast.Item(ast.InternedTerm("providerID"), ast.StringTerm(n.ProviderID)),
		ast.Item(ast.InternedTerm("metro"), ast.StringTerm(n.Metro)),
		ast.Item(ast.InternedTerm("facility"), ast.StringTerm(n.Facility)),
	)
}

func (n Node) equal(o Node) bool {
	return n.Name == o.Name && n.ProviderID == o.ProviderID && n.Metro == o.Metro && n.Facility == o.Facility &&
		maps.Equal(n.Labels, o.Labels)
}

// nodeCache keeps the AST of the nodes of the previous call. Converting a
// node (a dozen labels) costs more than evaluating a selector on it, and
// the CCM passes the same nodes to every decision, so reusing the AST of
// each unchanged node makes a 5,000-node decision several times cheaper;
// when no node changed, the whole array is reused. A node is reused only
// when every field and label is equal; the cache holds copies, so a caller
// changing its maps later cannot make it stale. Entries of nodes absent
// from the latest call are dropped.
type nodeCache struct {
	mu     sync.Mutex
	byName map[string]cachedNode
	last   *ast.Term // the array of the previous call
}

type cachedNode struct {
	index int // position in the previous call
	node  Node
	term  *ast.Term
}

// terms returns the array of nodes and the cache entries by name, which
// hold every name of nodes (duplicates included) and are never modified.
func (c *nodeCache) terms(nodes []Node) (*ast.Term, map[string]cachedNode) {
	c.mu.Lock()
	old, last := c.byName, c.last
	c.mu.Unlock()
	same := last != nil && len(old) == len(nodes)
	for i, n := range nodes {
		cached, ok := old[n.Name]
		if !ok || cached.index != i || !cached.node.equal(n) {
			same = false
			break
		}
	}
	if same {
		return last, old
	}
	next := make(map[string]cachedNode, len(nodes))
	terms := make([]*ast.Term, len(nodes))
	for i, n := range nodes {
		cached, ok := old[n.Name]
		if !ok || !cached.node.equal(n) {
			n.Labels = maps.Clone(n.Labels)
			cached = cachedNode{node: n, term: n.term()}
		}
		cached.index = i
		terms[i] = cached.term
		next[n.Name] = cached
	}
	arr := ast.ArrayTerm(terms...)
	c.mu.Lock()
	if len(next) == len(nodes) {
		c.byName, c.last = next, arr
	} else {
		// Duplicate names: an index no longer identifies a position, so
		// the whole-array shortcut must not be taken for this list.
		c.byName, c.last = map[string]cachedNode{}, nil
	}
	c.mu.Unlock()
	return arr, next
}

func requirementsTerm(reqs []Requirement) *ast.Term {
	terms := make([]*ast.Term, len(reqs))
	for i, r := range reqs {
		values := make([]*ast.Term, len(r.Values))
		for j, v := range r.Values {
			values[j] = ast.StringTerm(v)
		}
		terms[i] = ast.ObjectTerm(
			ast.Item(ast.InternedTerm("key"), ast.StringTerm(r.Key)),
			ast.Item(ast.InternedTerm("operator"), ast.StringTerm(r.Operator)),
			ast.Item(ast.InternedTerm("values"), ast.ArrayTerm(values...)),
		)
	}
	return ast.ArrayTerm(terms...)
}

// stringMapTerm is {} for a nil map, so policies never meet null labels.
func stringMapTerm(m map[string]string) *ast.Term {
	items := make([][2]*ast.Term, 0, len(m))
	for k, v := range m {
		items = append(items, ast.Item(ast.StringTerm(k), ast.StringTerm(v)))
	}
	return ast.ObjectTerm(items...)
}
