package controlplane

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"
)

// round is one pass: read what changed, probe, decide, act. It returns the
// delay until the next round.
func (m *Manager) round(ctx context.Context, now time.Time) time.Duration {
	logger := klog.FromContext(ctx)
	next, err := m.roundErr(ctx, now)
	msg := ""
	if err != nil {
		msg = err.Error()
		// The same error every round is logged once, then quietly.
		if msg != m.snapshot().Err {
			logger.Error(err, "Control-plane EIP round failed")
		} else {
			logger.V(4).Info("Control-plane EIP round failed again", "err", msg)
		}
	}
	m.setStatus(func(s *status) { s.Rounds++; s.Err = msg })
	return next
}

// roundErr is a round in four steps: gather the facts (the reservation,
// the nodes, the kube-apiserver's port), probe, decide (the pure Decide),
// act on the decision. It returns the delay until the next round.
func (m *Manager) roundErr(ctx context.Context, now time.Time) (time.Duration, error) {
	facts, delay, err := m.gather(ctx, now)
	if err != nil {
		return delay, err
	}
	health, ok := m.probe(ctx, now, facts)
	if !ok {
		return 0, nil // ctx ended during the probes
	}
	d := m.decide(now, facts, health)
	return m.act(ctx, now, d, facts.holderNode, health.holder)
}

// roundFacts is what a round knows before it probes.
type roundFacts struct {
	// port is the EIP's port; targetPort the kube-apiserver's on the nodes.
	port, targetPort int
	// nodes are the control-plane nodes, by name.
	nodes []*v1.Node
	// holderNode is the node the EIP is assigned to, "" when it is
	// unassigned, assigned more than once, or on another device.
	holderNode string
	// metros are the nodes' metro codes, by node name (only when the EIP
	// has a metro).
	metros map[string]string
}

// gather reads the kube-apiserver's port, the reservation (from Equinix
// when it is due), and the control-plane nodes, and keeps the external
// Service in step. On error, the delay is when to try again.
func (m *Manager) gather(ctx context.Context, now time.Time) (roundFacts, time.Duration, error) {
	src, err := m.services.Services(kubernetesNamespace).Get(kubernetesName)
	if err != nil {
		src = nil
	}
	srcSlices, _ := m.slices.EndpointSlices(kubernetesNamespace).List(labels.Everything())
	targetPort, err := apiServerTargetPort(src, srcSlices)
	if err != nil {
		return roundFacts{}, m.opts.Interval, err
	}
	f := roundFacts{port: m.opts.APIServerPort, targetPort: targetPort}
	if f.port == 0 {
		f.port = targetPort
	}

	if m.res.id == "" || now.Sub(m.res.readAt) >= m.opts.Resync {
		if err := m.refresh(ctx, now); err != nil {
			var te tagError
			if errors.As(err, &te) {
				// Someone must tag an EIP first; a full listing every
				// interval would only use up the API's rate limit.
				return roundFacts{}, m.opts.Resync, err
			}
			return roundFacts{}, m.opts.Interval, err
		}
	}
	if err := m.syncExternal(ctx, now, src, srcSlices, targetPort); err != nil {
		// Routing inside the cluster is broken, but the EIP assignment is
		// independent of it: go on with the round.
		klog.FromContext(ctx).Error(err, "Could not apply the external control-plane Service")
	}

	all, err := m.nodes.List(labels.Everything())
	if err != nil {
		return roundFacts{}, m.opts.Interval, fmt.Errorf("listing nodes: %w", err)
	}
	for _, n := range all {
		if isControlPlaneNode(n) {
			f.nodes = append(f.nodes, n)
		}
	}
	slices.SortFunc(f.nodes, func(a, b *v1.Node) int { return strings.Compare(a.Name, b.Name) })
	if m.res.metro != "" {
		f.metros = map[string]string{}
		for _, n := range f.nodes {
			f.metros[n.Name] = m.nodeMetro(ctx, n)
		}
	}
	if len(m.res.assignments) == 1 {
		for _, n := range f.nodes {
			if stateOf(n, health{}).DeviceID == m.res.assignments[0].DeviceID {
				f.holderNode = n.Name
			}
		}
	}
	return f, 0, nil
}

// roundHealth is what the probes say, with their history.
type roundHealth struct {
	nodes   []nodeState // every control-plane node with its health
	healthy int         // how many of them are healthy
	holder  health      // the holder's: the EIP's when probed through it
}

// probe probes the EIP (unless UseHostIP) and every other control-plane
// node, all at once, and records the results in the health histories. It
// returns false when ctx ended meanwhile.
func (m *Manager) probe(ctx context.Context, now time.Time, f roundFacts) (roundHealth, bool) {
	probeEIP := !m.opts.UseHostIP && len(m.res.assignments) == 1
	var targets []target
	if probeEIP {
		targets = append(targets, target{Key: "", Hosts: []string{m.res.address}, Port: f.port})
	}
	for _, n := range f.nodes {
		if probeEIP && n.Name == f.holderNode {
			continue
		}
		targets = append(targets, target{Key: n.Name, Hosts: probeAddresses(n, m.res.address), Port: f.targetPort})
	}
	// A round woken by a node event soon after the last probes decides on
	// their results instead of probing again: two probes a few
	// milliseconds apart would count one outage twice and shorten the
	// hysteresis.
	probeNow := m.lastProbe.IsZero() || now.Sub(m.lastProbe) >= m.opts.FastInterval
	var results map[string]error
	if probeNow {
		results = m.prober.ProbeAll(ctx, targets)
		if ctx.Err() != nil {
			return roundHealth{}, false
		}
		m.lastProbe = now
	}
	h := m.recordNodeProbes(ctx, f.nodes, results, probeNow)
	for i := range h.nodes {
		h.nodes[i].Metro = f.metros[h.nodes[i].Name]
	}
	h.holder = m.nodeHealth[f.holderNode]
	if probeEIP {
		if err, probed := results[""]; probed {
			m.eipHealth = m.eipHealth.Record(err == nil)
			recordProbe("eip", err)
			if err != nil {
				klog.FromContext(ctx).V(2).Info("Control-plane EIP probe failed", "eip", m.res.address, "failures", m.eipHealth.Failures, "err", err)
			}
		}
		h.holder = m.eipHealth
	}
	if probeNow {
		switch h.holder.Failures {
		case 1:
			m.firstFailure = now
		case 0:
			m.firstFailure = time.Time{}
		}
	}
	metricHealthyNodes.Set(float64(h.healthy))
	return h, true
}

// recordNodeProbes adds the nodes' probe results to their histories and
// forgets the nodes that are gone.
func (m *Manager) recordNodeProbes(ctx context.Context, nodes []*v1.Node, results map[string]error, probed bool) roundHealth {
	var h roundHealth
	present := map[string]bool{}
	for _, n := range nodes {
		present[n.Name] = true
		if err, ok := results[n.Name]; ok {
			m.nodeHealth[n.Name] = m.nodeHealth[n.Name].Record(err == nil)
			recordProbe(n.Name, err)
			if err != nil {
				klog.FromContext(ctx).V(4).Info("Control-plane node probe failed", "node", n.Name, "err", err)
			}
		} else if probed {
			// The holder, probed through the EIP: its own history starts
			// afresh when it stops being the holder.
			delete(m.nodeHealth, n.Name)
		}
		nh := m.nodeHealth[n.Name]
		if nh.Healthy() {
			h.healthy++
		}
		h.nodes = append(h.nodes, stateOf(n, nh))
	}
	for name := range m.nodeHealth {
		if !present[name] {
			delete(m.nodeHealth, name)
		}
	}
	return h
}

// decide runs the pure Decide on the round's facts and publishes what the
// manager sees.
func (m *Manager) decide(now time.Time, f roundFacts, h roundHealth) decision {
	d := decide(input{
		Now: now, Assignments: m.res.assignments, HolderHealth: h.holder,
		HolderSince: m.holderSince, Nodes: h.nodes, EIPMetro: m.res.metro,
		Policy: policy{Failures: m.opts.Failures, Rise: m.opts.Rise, Grace: m.opts.Grace},
	})
	m.setStatus(func(s *status) {
		s.EIP, s.HolderNode, s.Assignments, s.HealthyNodes, s.Last = m.res.address, f.holderNode, len(m.res.assignments), h.healthy, d
		s.HolderDevice = ""
		if len(m.res.assignments) == 1 {
			s.HolderDevice = m.res.assignments[0].DeviceID
		}
	})
	m.publishHolder(f.holderNode)
	return d
}

// act carries out the decision (a move, assign or trim through Equinix;
// an Event when the EIP is stuck or recovered) and returns the delay until
// the next round: short while something changes or the holder is failing.
func (m *Manager) act(ctx context.Context, now time.Time, d decision, holderNode string, holder health) (time.Duration, error) {
	switch d.Kind {
	case keep:
		metricStuck.Set(0)
		if m.lastReport != "" {
			m.event(v1.EventTypeNormal, reasonRecovered, "The control-plane EIP %s is on a healthy node again (%s)", m.res.address, holderNode)
			m.lastReport = ""
		}
	case stuck:
		metricStuck.Set(1)
		// Once per situation, not once per round: the reason's failure
		// count grows every round.
		if key := d.Cause + "/" + m.holderKey; key != m.lastReport {
			klog.FromContext(ctx).Info("Control-plane EIP cannot move", "reason", d.Reason)
			m.event(v1.EventTypeWarning, reasonUnhealthy, "Control-plane EIP %s: %s", m.res.address, d.Reason)
			m.lastReport = key
		}
	default:
		metricStuck.Set(0)
		m.lastReport = ""
		if err := m.execute(ctx, d, now, holderNode); err != nil {
			metricFailoverErrors.Inc()
			m.event(v1.EventTypeWarning, reasonFailoverFail, "Control-plane EIP %s: %s failed (the next round retries): %v", m.res.address, d.Kind, err)
			// Read the truth again and retry soon: whatever half of the
			// change went through, the next decision repairs it.
			m.res.readAt = time.Time{}
			return m.opts.FastInterval, err
		}
		return m.opts.FastInterval, nil
	}
	if holder.Failures > 0 && holder.Failures < m.opts.Failures {
		return m.opts.FastInterval, nil
	}
	return m.opts.Interval, nil
}

func recordProbe(target string, err error) {
	result := "success"
	if err != nil {
		result = "failure"
	}
	metricProbes.WithLabelValues(target, result).Inc()
}

// publishHolder keeps exactly one eip_holder series at 1.
func (m *Manager) publishHolder(node string) {
	metricHolder.Reset()
	if len(m.res.assignments) == 1 {
		metricHolder.WithLabelValues(node).Set(1)
	}
	metricAssignments.Set(float64(len(m.res.assignments)))
}

// nodeMetro is the metro of the node's device as Equinix reports it (from
// the device cache), or the node's region label (which the CCM sets to the
// metro) when the device cannot be read; "" when neither is known, and
// such a node is no candidate for the EIP.
func (m *Manager) nodeMetro(ctx context.Context, n *v1.Node) string {
	if id := stateOf(n, health{}).DeviceID; id != "" {
		d, err := m.metal.Device(ctx, id)
		if err == nil && d.Metro != nil && d.Metro.GetCode() != "" {
			return d.Metro.GetCode()
		}
		if err != nil {
			klog.FromContext(ctx).V(2).Info("Could not read a control-plane node's device for its metro; using its region label", "node", n.Name, "err", err)
		}
	}
	return n.Labels[v1.LabelTopologyRegion]
}
