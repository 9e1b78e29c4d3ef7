package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/dataplane"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
)

// Device is one machine of the sandbox project.
type Device struct {
	Name, Metro  string
	ControlPlane bool
	PrivateIP    string
}

// Devices is the sandbox project: three control-plane nodes on loopback
// addresses (two metros) and five workers.
var Devices = []Device{
	{Name: "cp-0", Metro: "da", ControlPlane: true, PrivateIP: "127.0.0.11"},
	{Name: "cp-1", Metro: "da", ControlPlane: true, PrivateIP: "127.0.1.12"},
	{Name: "cp-2", Metro: "sv", ControlPlane: true, PrivateIP: "127.1.0.13"},
	{Name: "worker-0", Metro: "da"}, {Name: "worker-1", Metro: "da"}, {Name: "worker-2", Metro: "da"},
	{Name: "worker-3", Metro: "sv"}, {Name: "worker-4", Metro: "sv"},
}

// Seed is the emulator's default project with devs. Without the data
// plane its private networks are on loopback (127.0.0.0/16 in da,
// 127.1.0.0/16 in sv), so the BGP source addresses and the control-plane
// health checks stay on this machine. With it, they are TEST-NET blocks on
// the private namespace's loopback (GoBGP refuses a 127/8 next hop), and
// the project has BGP with the ASN the routers expect.
func Seed(devs []Device, withDataPlane bool) *emulator.Seed {
	seed := emulator.DefaultSeed()
	for i := range seed.Metros {
		switch {
		case withDataPlane && dataplane.MetroBlocks[seed.Metros[i].Code] != "":
			seed.Metros[i].PrivateIPv4 = dataplane.MetroBlocks[seed.Metros[i].Code]
		case seed.Metros[i].Code == "da":
			seed.Metros[i].PrivateIPv4 = "127.0.0.0/16"
		case seed.Metros[i].Code == "sv":
			seed.Metros[i].PrivateIPv4 = "127.1.0.0/16"
		}
	}
	if withDataPlane {
		seed.Projects[0].BGP = &emulator.BGPConfigSeed{ASN: dataplane.ProjectASN}
	}
	// The address Service byo brings: an Elastic IP the user reserved in
	// the project (the CCM serves no other), without the CCM's tags.
	seed.Reservations = append(seed.Reservations, emulator.ReservationSeed{Metro: "da", Address: BYOAddress, Details: "reserved by the user for Service default/byo"})
	for _, d := range devs {
		s := emulator.DeviceSeed{Hostname: d.Name, Metro: d.Metro}
		if d.ControlPlane {
			// Only the private address, where the sandbox serves /healthz:
			// the health checks reach nothing else.
			s.PrivateIPv4, s.NoPublicIPv4, s.NoPublicIPv6 = d.PrivateIP, true, true
		}
		seed.Devices = append(seed.Devices, s)
	}
	return seed
}

// RegisterNodes creates a Node per device, as kubelets with
// --cloud-provider=external register them: hostname label, tainted
// uninitialized, the control-plane ones labelled as such, then Ready.
// (MetalLB's peers select nodes by hostname label.)
func RegisterNodes(ctx context.Context, kube kubernetes.Interface, devs []Device) error {
	for _, d := range devs {
		labels := map[string]string{v1.LabelHostname: d.Name}
		if d.ControlPlane {
			labels["node-role.kubernetes.io/control-plane"] = ""
		}
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: d.Name, Labels: labels},
			Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: v1.TaintEffectNoSchedule}}}}
		if _, err := kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			return err
		}
		// A patch, not an update: the CCM's node controller writes the
		// same Node at the same time.
		now := metav1.Now()
		status, _ := json.Marshal(map[string]any{"status": v1.NodeStatus{
			Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now}},
			Addresses:  []v1.NodeAddress{{Type: v1.NodeHostName, Address: d.Name}},
		}})
		if _, err := kube.CoreV1().Nodes().Patch(ctx, d.Name, types.StrategicMergePatchType, status, metav1.PatchOptions{}, "status"); err != nil {
			return err
		}
	}
	return nil
}

// EndpointSlice is the slice kube-controller-manager would write for a
// Service with one running Pod (on worker-0): MetalLB announces only a
// Service with a ready endpoint.
func EndpointSlice(svc *v1.Service) *discoveryv1.EndpointSlice {
	ready, node, port, proto, portName := true, "worker-0", int32(80), v1.ProtocolTCP, "http"
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: svc.Name + "-sandbox",
			Labels: map[string]string{discoveryv1.LabelServiceName: svc.Name, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.10"}, NodeName: &node,
			Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports: []discoveryv1.EndpointPort{{Name: &portName, Port: &port, Protocol: &proto}},
	}
}

// PrepareModuleTargets creates the namespace a custom module writes into
// (its namespace option) and, in legacy MetalLB mode, the ConfigMap with an
// entry of the user's own, so the view shows the CCM merging into it.
func PrepareModuleTargets(ctx context.Context, kube kubernetes.Interface, loadBalancer string) error {
	lb, err := config.ParseLoadBalancer(loadBalancer)
	if err != nil {
		return fmt.Errorf("--loadbalancer: %q %v", loadBalancer, err)
	}
	if ns := lb.Options["namespace"]; lb.Kind == config.LBWasm && ns != "" {
		_, err := kube.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	if lb.Kind == config.LBMetalLBConfigMap {
		_, err := kube.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: lb.Namespace}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: lb.Namespace, Name: lb.ConfigMap},
			Data: map[string]string{"config": "address-pools:\n- name: users-own-pool\n  protocol: bgp\n  addresses:\n  - 192.0.2.0/28\n"}}
		if _, err := kube.CoreV1().ConfigMaps(lb.Namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

// BYOAddress is Service byo's own address, reserved in metro da by Seed; at
// the end of da's block, where the Elastic IPs the CCM reserves (from the
// start) never reach.
const BYOAddress = "198.18.63.10"

// SampleServices are one Service per behaviour worth seeing.
func SampleServices() []*v1.Service {
	mk := func(name string, ann map[string]string, ip string) *v1.Service {
		return &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Annotations: ann},
			Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, LoadBalancerIP: ip, Selector: map[string]string{"app": name},
				Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}}},
		}
	}
	return []*v1.Service{
		mk("web", map[string]string{"metal.equinix.com/eip-metro": "da"}, ""),
		mk("api", map[string]string{"metal.equinix.com/eip-metro": "sv"}, ""),
		mk("byo", nil, BYOAddress),
		mk("nowhere", nil, ""),
	}
}

// startCCM runs the CCM binary against the emulator and the cluster, with
// the API key in the cloud-config file only.
func startCCM(o Options, dir, metalURL, kubeconfig string) (*dataplane.Proc, error) {
	cc := filepath.Join(dir, "cloud-sa.json")
	if err := writeCloudConfig(cc, o, dir, metalURL); err != nil {
		return nil, err
	}
	return dataplane.Start(dir, "ccm", o.CCM, []string{
		"--kubeconfig=" + kubeconfig, "--cloud-config=" + cc,
		"--leader-elect=true", "--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=1s",
		"--secure-port=0", "--authentication-skip-lookup", "--v=2",
	}, []string{"METAL_API_KEY="}) // the key comes from the file only
}

// writeCloudConfig writes the CCM's cloud-config for the emulator at
// metalURL: the sandbox's settings, as a user's cloud-sa.json holds them.
func writeCloudConfig(path string, o Options, dir, metalURL string) error {
	cloudConfig := map[string]any{
		"apiKey": emulator.DefaultToken, "projectID": emulator.DefaultProjectID, "base-url": metalURL,
		"loadbalancer": o.LoadBalancer, "eipTag": cpTag, "eipHealthCheckUseHostIP": true,
		"moduleCacheDir": filepath.Join(dir, "module-cache"),
	}
	if o.PolicyDir != "" {
		cloudConfig["policyDir"] = o.PolicyDir
	}
	b, _ := json.MarshalIndent(cloudConfig, "", "  ")
	return os.WriteFile(path, b, 0o600)
}
