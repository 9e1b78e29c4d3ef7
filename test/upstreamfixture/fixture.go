// Package upstreamfixture loads what another CCM left behind in a cluster
// and in Equinix Metal — a folder with cluster.yaml (the objects as the
// apiserver returned them) and emulator-state.json (GET /_emulator/state)
// — into a test apiserver and an emulator, so a take-over test starts from
// exactly that state. The format is the one of ../shared/fixtures (see
// testdata/README.md where the fixtures are copied).
package upstreamfixture

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
)

// clusterTag is the prefix of the Elastic IP tag that names the cluster
// (the kube-system Namespace's uid).
const clusterTag = "cluster="

// Fixture is one captured state.
type Fixture struct {
	// Objects are cluster.yaml's documents in file order.
	Objects []*unstructured.Unstructured
	// State is emulator-state.json.
	State emulator.StateView
	// ClusterUID is the captured kube-system uid, the value of the
	// reservations' cluster= tag.
	ClusterUID string
}

// Load reads dir/cluster.yaml and dir/emulator-state.json.
func Load(dir string) (*Fixture, error) {
	f := &Fixture{}
	raw, err := os.ReadFile(filepath.Join(dir, "cluster.yaml"))
	if err != nil {
		return nil, err
	}
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("%s/cluster.yaml: %w", dir, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if u.GetKind() == "Namespace" && u.GetName() == "kube-system" {
			f.ClusterUID = string(u.GetUID())
		}
		f.Objects = append(f.Objects, u)
	}
	if f.ClusterUID == "" {
		return nil, fmt.Errorf("%s/cluster.yaml has no kube-system Namespace with its uid; the reservations' cluster= tag cannot be mapped", dir)
	}
	raw, err = os.ReadFile(filepath.Join(dir, "emulator-state.json"))
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, &f.State); err != nil {
		return nil, fmt.Errorf("%s/emulator-state.json: %w", dir, err)
	}
	if len(f.State.Projects) != 1 {
		return nil, fmt.Errorf("%s/emulator-state.json has %d projects; the loader handles one", dir, len(f.State.Projects))
	}
	return f, nil
}

// Project is the captured project.
func (f *Fixture) Project() emulator.ProjectView { return f.State.Projects[0] }

// ElasticIPs are the captured reservations that are not a device's own
// addresses (the Services' Elastic IPs), with their captured tags.
func (f *Fixture) ElasticIPs() []emulator.Reservation {
	var out []emulator.Reservation
	for _, r := range f.Project().Reservations {
		if !r.Management {
			out = append(out, r)
		}
	}
	return out
}

// Seed is the emulator seed of the captured state: the project with its
// BGP configuration, the devices with their IDs, addresses and BGP
// sessions, and the Elastic IPs with their IDs, addresses, tags and
// details; the cluster= tag is rewritten to clusterUID, the new cluster's
// kube-system uid. The emulator gives the devices' own address blocks and
// the BGP sessions new IDs (no CCM reads them).
func (f *Fixture) Seed(clusterUID string) (*emulator.Seed, error) {
	p := f.Project()
	s := emulator.DefaultSeed()
	ps := emulator.ProjectSeed{ID: p.ID, Name: p.Name}
	if b := p.BGPConfig; b != nil {
		ps.BGP = &emulator.BGPConfigSeed{ID: b.ID, ASN: b.ASN, MD5: b.MD5, DeploymentType: b.DeploymentType, Status: b.Status, MaxPrefix: b.MaxPrefix}
	}
	s.Projects = []emulator.ProjectSeed{ps}
	for _, d := range p.Devices {
		ds := emulator.DeviceSeed{ID: d.ID, Hostname: d.Hostname, Project: p.ID, Metro: d.Metro, Facility: d.Facility, Plan: d.Plan, State: d.State, Tags: d.Tags,
			NoPublicIPv4: true, NoPrivateIPv4: true, NoPublicIPv6: true}
		for _, a := range d.Addresses {
			if !a.Management {
				continue
			}
			switch a.Type {
			case emulator.TypePublicIPv4:
				ds.PublicIPv4, ds.NoPublicIPv4 = a.Address.String(), false
			case emulator.TypePrivateIPv4:
				ds.PrivateIPv4, ds.NoPrivateIPv4 = a.Address.String(), false
			case emulator.TypePublicIPv6:
				ds.PublicIPv6, ds.NoPublicIPv6 = a.Address.String(), false
			}
		}
		for _, bs := range d.BGPSessions {
			ds.BGPSessions = append(ds.BGPSessions, bs.AddressFamily)
		}
		s.Devices = append(s.Devices, ds)
	}
	for _, r := range f.ElasticIPs() {
		if len(r.Assignments) > 0 {
			return nil, fmt.Errorf("reservation %s is assigned to a device; the loader seeds unassigned Elastic IPs only", r.ID)
		}
		tags := make([]string, len(r.Tags))
		for i, t := range r.Tags {
			if t == clusterTag+f.ClusterUID {
				t = clusterTag + clusterUID
			}
			tags[i] = t
		}
		s.Reservations = append(s.Reservations, emulator.ReservationSeed{
			ID: r.ID, Project: p.ID, Type: r.Type, Metro: r.Metro, Facility: r.Facility,
			Address: r.Prefix.String(), Tags: tags, Details: r.Details, Customdata: r.Customdata,
		})
	}
	return s, nil
}

// UpstreamManager is the field manager upstream v3.8.1's writes carry: its
// MetalLB client (controller-runtime, no user agent set) names itself
// after its binary, cloud-provider-equinix-metal, and writes with Update,
// never server-side apply.
const UpstreamManager = "cloud-provider-equinix-metal"

// upstreamMetalLBVersion is the version upstream v3.8.1 writes every
// MetalLB kind in: its MetalLB v0.13.12 Go types, metallb.io/v1beta1 for
// BGPPeer too. The apiserver stores BGPPeers as v1beta2 and returns them
// so (cluster.yaml), but the managed fields of upstream's writes stay at
// v1beta1, and those are what a take-over meets.
const upstreamMetalLBVersion = "metallb.io/v1beta1"

// Apply creates the captured objects in the cluster: every object but the
// kube-system Namespace (the cluster has its own), each object's status
// written through the status subresource, missing namespaces created
// first. MetalLB's objects are written as upstream wrote them: at
// upstreamMetalLBVersion, by UpstreamManager (the fields of the captured
// v1beta2 objects that v1beta1 lacks, set there by the CRD's defaults, are
// dropped by the apiserver as they were for upstream).
func (f *Fixture) Apply(ctx context.Context, cfg *rest.Config) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	for _, o := range f.Objects {
		if o.GetKind() == "Namespace" && o.GetName() == "kube-system" {
			continue
		}
		if err := create(ctx, dyn, mapper, o.DeepCopy()); err != nil {
			return fmt.Errorf("creating %s %s: %w", o.GetKind(), qualified(o), err)
		}
	}
	return nil
}

func create(ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, o *unstructured.Unstructured) error {
	opts := metav1.CreateOptions{}
	if o.GroupVersionKind().Group == "metallb.io" {
		o.SetAPIVersion(upstreamMetalLBVersion)
		opts.FieldManager = UpstreamManager
	}
	m, err := mapper.RESTMapping(o.GroupVersionKind().GroupKind(), o.GroupVersionKind().Version)
	if err != nil {
		return err
	}
	var res dynamic.ResourceInterface = dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ns := o.GetNamespace()
		if err := ensureNamespace(ctx, dyn, ns); err != nil {
			return err
		}
		res = dyn.Resource(m.Resource).Namespace(ns)
	}
	status, hasStatus := o.Object["status"]
	created, err := res.Create(ctx, o, opts)
	if err != nil {
		return err
	}
	if !hasStatus {
		return nil
	}
	created.Object["status"] = status
	_, err = res.UpdateStatus(ctx, created, metav1.UpdateOptions{})
	return err
}

func ensureNamespace(ctx context.Context, dyn dynamic.Interface, name string) error {
	nsRes := dyn.Resource(namespaces)
	if _, err := nsRes.Get(ctx, name, metav1.GetOptions{}); err == nil {
		return nil
	}
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name}}}
	_, err := nsRes.Create(ctx, ns, metav1.CreateOptions{})
	return err
}

func qualified(o *unstructured.Unstructured) string {
	if o.GetNamespace() == "" {
		return o.GetName()
	}
	return o.GetNamespace() + "/" + o.GetName()
}

var namespaces = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
