//go:build e2e && linux

package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/record"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbmodule"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/sdktest"
	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk/wasmhost"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/dataplane"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/testenv"
)

var (
	peersV1beta1 = schema.GroupVersionResource{Group: "metallb.io", Version: "v1beta1", Resource: "bgppeers"}
	peersV1beta2 = peersV1beta1.GroupResource().WithVersion("v1beta2")
)

// webhookPort is where MetalLB's controller serves its webhooks (fixed in
// its code); this test runs in its own network namespace.
const webhookPort = 9443

// TestTakeOverWithConversionWebhook: the other half of the take-over from
// upstream's BGPPeers (host/lbmodule's TestApplyOverPeersUpstreamWrote
// runs the CRDs without MetalLB's conversion webhook). Here the CRD
// converts v1beta1 <-> v1beta2 through MetalLB's own controller, as
// MetalLB's manifests install it. Upstream's peer, written at v1beta1, is
// applied over at v1beta2 with nothing dropped (the webhook converts for
// upstream's managed fields); then, with the webhook down, the next
// change still applies: the CCM drops the v1beta1 ownership it can no
// longer convert and records one Event saying so.
func TestTakeOverWithConversionWebhook(t *testing.T) {
	bins := binaries(t)
	ctx := context.Background()
	must(t, dataplane.AddLoopbackAddresses()) // lo up: the apiserver, etcd and the webhook listen there
	env := testenv.New(t)
	kube := kubernetes.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	for _, n := range []string{"worker-1", "worker-2", "worker-3"} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"kubernetes.io/hostname": n}}}
		must(t, ignoreExists(kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})))
	}
	must(t, ignoreExists(kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: dataplane.MetalLBNamespace}}, metav1.CreateOptions{})))

	dir := t.TempDir()
	caPEM := writeServingCert(t, dir)
	convertThroughWebhook(t, env, caPEM)
	upstream := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metallb.io/v1beta1", "kind": "BGPPeer",
		"metadata": map[string]any{"name": "worker-1-0", "namespace": dataplane.MetalLBNamespace, "labels": map[string]any{"cloud-provider": "equinix-metal"}},
		"spec": map[string]any{"myASN": int64(65000), "peerASN": int64(65530), "peerAddress": "169.254.255.1", "sourceAddress": "10.66.0.1",
			"nodeSelectors": []any{map[string]any{"matchLabels": map[string]any{"kubernetes.io/hostname": "worker-1"}}}}}}
	create := func(dryRun ...string) error {
		_, err := dyn.Resource(peersV1beta1).Namespace(dataplane.MetalLBNamespace).Create(ctx, upstream,
			metav1.CreateOptions{FieldManager: "cloud-provider-equinix-metal", DryRun: dryRun})
		return err
	}
	// Until MetalLB's controller serves, a v1beta1 write fails in the
	// webhook: proof that the apiserver converts through it from here on.
	// The probe is a dry run: the CRD's new conversion reaches the
	// apiserver's handlers a moment after the update, and a real create in
	// that moment would be stored unconverted yet answered with the
	// webhook's error.
	waitFor(t, "the apiserver calling the conversion webhook", func() (bool, string) {
		err := create(metav1.DryRunAll)
		return err != nil && strings.Contains(err.Error(), "conversion webhook"), fmt.Sprint(err)
	})
	// controller-runtime reads the serving certificate from
	// $TMPDIR/k8s-webhook-server/serving-certs (MetalLB's --cert-dir is
	// for its own rotation only).
	webhook, err := dataplane.Start(dir, "metallb-webhook", bins.MetalLBController, []string{
		"--namespace=" + dataplane.MetalLBNamespace, "--webhook-mode=onlywebhook", "--disable-cert-rotation",
		"--port=7471", "--log-level=info",
	}, []string{"KUBECONFIG=" + env.KubeconfigPath, "TMPDIR=" + dir})
	must(t, err)
	t.Cleanup(webhook.Stop)
	// Upstream's write: a v1beta1 BGPPeer by its manager, stored as
	// v1beta2 through the webhook.
	// An attempt can store the peer and still time out on the way back;
	// nothing else creates it, so AlreadyExists is that attempt's success.
	waitFor(t, "upstream's v1beta1 peer created through MetalLB's webhook (log "+webhook.Log+")", func() (bool, string) {
		err := create()
		return err == nil || apierrors.IsAlreadyExists(err), fmt.Sprint(err)
	})

	req := peerRequest("10.66.0.1")
	rec := record.NewFakeRecorder(100)
	r := webhookReconciler(t, env, req, rec)
	must(t, r.Sync(ctx))
	if got := resets(rec); len(got) != 0 {
		t.Errorf("with the webhook up: %q, want no ownership dropped", got)
	}
	if at := managersAt(t, dyn); !strings.Contains(at, "cloud-provider-equinix-metal/Update@metallb.io/v1beta1") {
		t.Errorf("with the webhook up, upstream's v1beta1 ownership should stay; managed fields %s", at)
	}

	// The webhook goes down; the module changes the peer's source address.
	webhook.Stop()
	r = webhookReconciler(t, env, peerRequest("10.66.0.9"), rec)
	if err := r.Sync(ctx); err != nil {
		t.Fatalf("with the webhook down: %v", err)
	}
	peer, err := dyn.Resource(peersV1beta2).Namespace(dataplane.MetalLBNamespace).Get(ctx, "worker-1-0", metav1.GetOptions{})
	must(t, err)
	if src, _, _ := unstructured.NestedString(peer.Object, "spec", "sourceAddress"); src != "10.66.0.9" {
		t.Errorf("peer sourceAddress %q after the change, want 10.66.0.9", src)
	}
	if at := managersAt(t, dyn); strings.Contains(at, "v1beta1") {
		t.Errorf("managed fields %s: the v1beta1 ownership should be gone", at)
	}
	if got := resets(rec); len(got) != 1 || !strings.Contains(got[0], "cloud-provider-equinix-metal (Update, metallb.io/v1beta1)") || !strings.Contains(got[0], "conversion webhook") {
		t.Errorf("with the webhook down: %q, want one FieldOwnershipReset naming upstream's v1beta1 writes and the webhook", got)
	}
}

// peerRequest is one Service and three nodes with two peers each,
// worker-1's source address src (the module writes peers only when there
// is something to announce).
func peerRequest(src string) sdk.GenerateRequest {
	req := sdk.GenerateRequest{Services: []sdk.Service{{Namespace: "shop", Name: "web", UID: "uid-web", IPs: []string{"145.40.1.10"}, Ports: []sdk.Port{{Protocol: "TCP", Port: 443}}}}}
	for i, name := range []string{"worker-1", "worker-2", "worker-3"} {
		ip := fmt.Sprintf("10.66.0.%d", i+1)
		if i == 0 {
			ip = src
		}
		req.Nodes = append(req.Nodes, sdk.Node{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}, LocalASN: 65000, SourceIP: ip,
			Peers: []sdk.Peer{{ASN: 65530, IP: "169.254.255.1"}, {ASN: 65530, IP: "169.254.255.2"}}})
	}
	return req
}

func webhookReconciler(t *testing.T, env *testenv.Env, req sdk.GenerateRequest, rec *record.FakeRecorder) *lbmodule.Reconciler {
	t.Helper()
	ctx := context.Background()
	m, err := wasmhost.LoadBytes(ctx, "metallb-crd", sdktest.Build(t, "../../modules/metallb-crd"), sdk.Options{Namespace: dataplane.MetalLBNamespace}, wasmhost.Options{})
	must(t, err)
	t.Cleanup(func() { m.Close(ctx) })
	r, err := lbmodule.NewReconciler(lbmodule.ReconcilerConfig{Module: m, Dynamic: dynamic.NewForConfigOrDie(env.Config), Metadata: metadata.NewForConfigOrDie(env.Config),
		Kube: kubernetes.NewForConfigOrDie(env.Config), Recorder: rec,
		Snapshot: func(context.Context) (sdk.GenerateRequest, error) { return req, nil }})
	must(t, err)
	return r
}

// managersAt lists the peer's managed fields as manager/operation@version.
func managersAt(t *testing.T, dyn dynamic.Interface) string {
	t.Helper()
	peer, err := dyn.Resource(peersV1beta2).Namespace(dataplane.MetalLBNamespace).Get(context.Background(), "worker-1-0", metav1.GetOptions{})
	must(t, err)
	var out []string
	for _, mf := range peer.GetManagedFields() {
		out = append(out, fmt.Sprintf("%s/%s@%s", mf.Manager, mf.Operation, mf.APIVersion))
	}
	return strings.Join(out, " ")
}

func resets(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			if strings.Contains(e, "FieldOwnershipReset") {
				out = append(out, e)
			}
		default:
			return out
		}
	}
}

// convertThroughWebhook sets the BGPPeer CRD's conversion to MetalLB's
// webhook, as MetalLB's kustomize patch does, at this machine's address
// instead of its Service (nothing routes to a Service here).
func convertThroughWebhook(t *testing.T, env *testenv.Env, caPEM []byte) {
	t.Helper()
	ctx := context.Background()
	cs := apiextensionsclient.NewForConfigOrDie(env.Config)
	crd, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "bgppeers.metallb.io", metav1.GetOptions{})
	must(t, err)
	url := fmt.Sprintf("https://127.0.0.1:%d/convert", webhookPort)
	crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter, Webhook: &apiextensionsv1.WebhookConversion{
		ConversionReviewVersions: []string{"v1beta1", "v1beta2"},
		ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: caPEM},
	}}
	_, err = cs.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, crd, metav1.UpdateOptions{})
	must(t, err)
}

// writeServingCert writes tls.crt and tls.key for 127.0.0.1 where
// controller-runtime's webhook server reads them with TMPDIR=dir, and returns the CA (the
// certificate signs itself).
func writeServingCert(t *testing.T, dir string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "metallb-webhook"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	must(t, err)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyDER, err := x509.MarshalECPrivateKey(key)
	must(t, err)
	certs := filepath.Join(dir, "k8s-webhook-server", "serving-certs")
	must(t, os.MkdirAll(certs, 0o700))
	must(t, os.WriteFile(filepath.Join(certs, "tls.crt"), certPEM, 0o600))
	must(t, os.WriteFile(filepath.Join(certs, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600))
	return certPEM
}

// ignoreExists is err unless it says the object exists already (testenv
// may have created it).
func ignoreExists[T any](_ T, err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// waitFor polls cond every 200 ms for up to a minute.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		var ok bool
		if ok, last = cond(); ok {
			return
		}
	}
	t.Fatalf("%s: never happened; last seen: %s", what, last)
}
