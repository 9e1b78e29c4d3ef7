package instances

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/equinix/equinix-sdk-go/services/metalv1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"
)

func ptr[T any](v T) *T { return &v }

func ipa(addr string, family int32, public, management bool) metalv1.IPAssignment {
	return metalv1.IPAssignment{Address: ptr(addr), AddressFamily: ptr(family), Public: ptr(public), Management: ptr(management)}
}

func device() *metalv1.Device {
	priv := ipa("10.1.2.3", 4, false, true)
	priv.ParentBlock = &metalv1.ParentBlock{Network: ptr("10.1.2.0"), Cidr: ptr(int32(25))}
	return &metalv1.Device{
		Id:       ptr("3f8f7d2e-0000-4000-8000-000000000001"),
		Hostname: ptr("worker-1"),
		State:    ptr(metalv1.DEVICESTATE_ACTIVE),
		Plan:     &metalv1.Plan{Slug: ptr("c3.small.x86")},
		Metro:    &metalv1.DeviceMetro{Code: ptr("da")},
		Facility: &metalv1.Facility{Code: ptr("da11")},
		IpAddresses: []metalv1.IPAssignment{
			ipa("147.75.1.2", 4, true, true),
			priv,
			ipa("2604:1380::1", 6, true, true),
			ipa("147.75.9.9", 4, true, false), // an Elastic IP assigned to the device
		},
	}
}

func TestNodeAddresses(t *testing.T) {
	v6 := Options{ExternalIPv6: true}
	cases := []struct {
		name   string
		nodeIP string
		opts   Options
		want   []v1.NodeAddress
	}{
		{
			name: "device addresses, IPv4 as upstream lists them",
			want: []v1.NodeAddress{
				{Type: v1.NodeHostName, Address: "worker-1"},
				{Type: v1.NodeExternalIP, Address: "147.75.1.2"},
				{Type: v1.NodeInternalIP, Address: "10.1.2.3"},
			},
		},
		{
			name: "device addresses with the public IPv6",
			opts: v6,
			want: []v1.NodeAddress{
				{Type: v1.NodeHostName, Address: "worker-1"},
				{Type: v1.NodeExternalIP, Address: "147.75.1.2"},
				{Type: v1.NodeInternalIP, Address: "10.1.2.3"},
				{Type: v1.NodeExternalIP, Address: "2604:1380::1"},
			},
		},
		{
			name:   "kubelet --node-ip on a VLAN comes first",
			nodeIP: "192.168.10.5",
			opts:   v6,
			want: []v1.NodeAddress{
				{Type: v1.NodeHostName, Address: "worker-1"},
				{Type: v1.NodeInternalIP, Address: "192.168.10.5"},
				{Type: v1.NodeExternalIP, Address: "147.75.1.2"},
				{Type: v1.NodeInternalIP, Address: "10.1.2.3"},
				{Type: v1.NodeExternalIP, Address: "2604:1380::1"},
			},
		},
		{
			name:   "--node-ip the API reports too is listed once",
			nodeIP: "10.1.2.3",
			opts:   v6,
			want: []v1.NodeAddress{
				{Type: v1.NodeHostName, Address: "worker-1"},
				{Type: v1.NodeInternalIP, Address: "10.1.2.3"},
				{Type: v1.NodeExternalIP, Address: "147.75.1.2"},
				{Type: v1.NodeExternalIP, Address: "2604:1380::1"},
			},
		},
		{
			name:   "private Elastic IP given as --node-ip",
			nodeIP: "147.75.9.9",
			opts:   v6,
			want: []v1.NodeAddress{
				{Type: v1.NodeHostName, Address: "worker-1"},
				{Type: v1.NodeInternalIP, Address: "147.75.9.9"},
				{Type: v1.NodeExternalIP, Address: "147.75.1.2"},
				{Type: v1.NodeInternalIP, Address: "10.1.2.3"},
				{Type: v1.NodeExternalIP, Address: "2604:1380::1"},
			},
		},
		{
			name:   "a dual-stack --node-ip without the ExternalIPv6",
			nodeIP: "10.1.2.3,2604:1380::1",
			want: []v1.NodeAddress{
				{Type: v1.NodeHostName, Address: "worker-1"},
				{Type: v1.NodeInternalIP, Address: "10.1.2.3"},
				{Type: v1.NodeInternalIP, Address: "2604:1380::1"},
				{Type: v1.NodeExternalIP, Address: "147.75.1.2"},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1"}}
			if tc.nodeIP != "" {
				node.Annotations = map[string]string{providedNodeIPAnnotation: tc.nodeIP}
			}
			got, err := nodeAddresses(device(), node, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v\nwant %v", got, tc.want)
			}
		})
	}

	t.Run("no addresses yet", func(t *testing.T) {
		d := device()
		d.IpAddresses = nil
		if _, err := nodeAddresses(d, nil, Options{}); err == nil {
			t.Fatal("want an error for a device without addresses")
		}
	})
}

func TestPrivateNetwork(t *testing.T) {
	if got, ok := PrivateIPv4Network(device()); !ok || got != "10.1.2.0/25" {
		t.Fatalf("got %q %v", got, ok)
	}
	if got, ok := PrivateIPv4(device()); !ok || got != "10.1.2.3" {
		t.Fatalf("got %q %v", got, ok)
	}
}

func TestDeviceID(t *testing.T) {
	cases := []struct{ in, want, err string }{
		{in: "equinixmetal://abc-123", want: "abc-123"},
		{in: "equinixmetal:///abc-123", want: "abc-123"},
		{in: "packet://abc-123", want: "abc-123"},
		{in: "aws:///us-east-1a/i-123", err: "registered by another cloud provider"},
		{in: "equinixmetal://", err: "no device ID"},
		{in: "abc-123", err: "not of the form"},
		// A bare device UUID, as upstream accepts it.
		{in: "30b8a951-456a-4a74-80d6-56f2c75e01f9", want: "30b8a951-456a-4a74-80d6-56f2c75e01f9"},
		{in: "30B8A951-456A-4A74-80D6-56F2C75E01F9", want: "30b8a951-456a-4a74-80d6-56f2c75e01f9"},
		{in: "30b8a951-456a-4a74-80d6-56f2c75e01f", err: "not of the form"},
		{in: "30b8a951x456a-4a74-80d6-56f2c75e01f9", err: "not of the form"},
	}
	for _, tc := range cases {
		got, err := DeviceID(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err = %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: got %q, %v", tc.in, got, err)
		}
	}
}

var errNotFound = errors.New("404 Not Found")

type fakeDevices struct {
	byID   map[string]*metalv1.Device
	err    error
	byName map[string]*metalv1.Device
}

func (f fakeDevices) Device(_ context.Context, id string) (*metalv1.Device, error) {
	if f.err != nil {
		return nil, f.err
	}
	if d, ok := f.byID[id]; ok {
		return d, nil
	}
	return nil, errNotFound
}

func (f fakeDevices) DeviceFresh(ctx context.Context, id string) (*metalv1.Device, error) {
	return f.Device(ctx, id)
}

func (f fakeDevices) DeviceByHostname(_ context.Context, h string) (*metalv1.Device, error) {
	if d, ok := f.byName[h]; ok {
		return d, nil
	}
	return nil, errNotFound
}

func TestInstancesV2(t *testing.T) {
	d := device()
	ok := fakeDevices{byID: map[string]*metalv1.Device{d.GetId(): d}, byName: map[string]*metalv1.Device{"worker-1": d}}
	isNF := func(err error) bool { return errors.Is(err, errNotFound) }
	ctx := context.Background()
	withID := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1"}, Spec: v1.NodeSpec{ProviderID: "equinixmetal://" + d.GetId()}}
	gone := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gone"}, Spec: v1.NodeSpec{ProviderID: "equinixmetal://missing"}}
	byName := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1"}}

	inst := New(ok, isNF, Options{})
	if exists, err := inst.InstanceExists(ctx, withID); !exists || err != nil {
		t.Errorf("exists = %v, %v", exists, err)
	}
	if exists, err := inst.InstanceExists(ctx, gone); exists || err != nil {
		t.Errorf("a 404 must be (false, nil), got %v, %v", exists, err)
	}
	if _, err := inst.InstanceMetadata(ctx, gone); !errors.Is(err, cloudprovider.InstanceNotFound) {
		t.Errorf("metadata of a missing device: %v", err)
	}
	broken := New(fakeDevices{err: errors.New("503 Service Unavailable")}, isNF, Options{})
	if exists, err := broken.InstanceExists(ctx, withID); exists || err == nil {
		t.Errorf("an API error must be an error, not 'does not exist': %v, %v", exists, err)
	}

	md, err := inst.InstanceMetadata(ctx, byName)
	if err != nil {
		t.Fatal(err)
	}
	want := cloudprovider.InstanceMetadata{ProviderID: "equinixmetal://" + d.GetId(), InstanceType: "c3.small.x86", Region: "da", Zone: "da11"}
	md.NodeAddresses = nil
	if !reflect.DeepEqual(*md, want) {
		t.Errorf("metadata %+v, want %+v", *md, want)
	}

	off := device()
	off.State = ptr(metalv1.DEVICESTATE_INACTIVE)
	inst = New(fakeDevices{byID: map[string]*metalv1.Device{d.GetId(): off}}, isNF, Options{})
	if down, err := inst.InstanceShutdown(ctx, withID); !down || err != nil {
		t.Errorf("inactive device: shutdown = %v, %v", down, err)
	}
}
