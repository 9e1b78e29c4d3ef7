//go:build linux

package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/metal-ccm/cloud-provider-equinix-metal/test/deploycheck"
)

const (
	// DNSServiceIP is kube-dns's ClusterIP, the tenth address of the
	// Service range as kubeadm chooses it; the kubelets' clusterDNS.
	DNSServiceIP = "10.0.0.10"
	// ClusterDomain is the kubelets' clusterDomain and e2e.test's default
	// --dns-domain.
	ClusterDomain = "cluster.local"
	corednsImage  = "cluster.test/coredns:test"
)

// kubeletDNS is what the kubelet configuration gains with cluster DNS.
const kubeletDNS = "clusterDNS: [" + DNSServiceIP + "]\nclusterDomain: " + ClusterDomain + "\n"

// corednsObjects are kubeadm's CoreDNS add-on, trimmed to what a cluster
// without an upstream resolver needs: the kubernetes plugin answers the
// cluster domain and the reverse zones, and nothing is forwarded (these
// machines reach no DNS server beyond the cluster's own).
const corednsObjects = `
apiVersion: v1
kind: ServiceAccount
metadata: {name: coredns, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:coredns"}
rules:
- apiGroups: [""]
  resources: [endpoints, services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "system:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:coredns"}
subjects:
- {kind: ServiceAccount, name: coredns, namespace: kube-system}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: coredns, namespace: kube-system}
data:
  Corefile: |
    .:53 {
        errors
        health {
            lameduck 5s
        }
        ready
        kubernetes {{domain}} in-addr.arpa ip6.arpa {
            pods insecure
            ttl 30
        }
        cache 30
        loadbalance
    }
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: coredns
  namespace: kube-system
  labels: {k8s-app: kube-dns}
spec:
  replicas: 2
  selector:
    matchLabels: {k8s-app: kube-dns}
  template:
    metadata:
      labels: {k8s-app: kube-dns}
    spec:
      serviceAccountName: coredns
      priorityClassName: system-cluster-critical
      dnsPolicy: Default
      affinity:
        podAntiAffinity:
          preferredDuringSchedulingIgnoredDuringExecution:
          - weight: 100
            podAffinityTerm:
              topologyKey: kubernetes.io/hostname
              labelSelector:
                matchLabels: {k8s-app: kube-dns}
      containers:
      - name: coredns
        image: {{image}}
        imagePullPolicy: Never
        args: ["-conf", "/etc/coredns/Corefile"]
        ports:
        - {name: dns, containerPort: 53, protocol: UDP}
        - {name: dns-tcp, containerPort: 53, protocol: TCP}
        livenessProbe:
          httpGet: {path: /health, port: 8080}
        readinessProbe:
          httpGet: {path: /ready, port: 8181}
          periodSeconds: 2
        volumeMounts:
        - {name: config, mountPath: /etc/coredns, readOnly: true}
      volumes:
      - name: config
        configMap:
          name: coredns
          items: [{key: Corefile, path: Corefile}]
---
apiVersion: v1
kind: Service
metadata:
  name: kube-dns
  namespace: kube-system
  labels: {k8s-app: kube-dns}
spec:
  clusterIP: {{ip}}
  selector: {k8s-app: kube-dns}
  ports:
  - {name: dns, port: 53, protocol: UDP}
  - {name: dns-tcp, port: 53, protocol: TCP}
`

// corednsImageOf is an image of the CoreDNS binary built here.
func corednsImageOf(bin string) (nodeImage, error) {
	img, err := hostFilesImage(map[string]string{"/coredns": bin}, false, []string{"/coredns"}, nil)
	if err != nil {
		return nodeImage{}, err
	}
	return nodeImage{corednsImage, img}, nil
}

// installDNS applies the CoreDNS add-on and waits until it answers.
func (c *Cluster) installDNS(ctx context.Context) error {
	began := time.Now()
	objs, err := decodeObjects([]byte(fill(corednsObjects, "domain", ClusterDomain, "image", corednsImage, "ip", DNSServiceIP)))
	if err != nil {
		return err
	}
	if err := deploycheck.Apply(ctx, c.Env.Config, objs); err != nil {
		return fmt.Errorf("cluster: installing CoreDNS: %w", err)
	}
	err = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		d, err := c.Client.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
		return err == nil && d.Status.ReadyReplicas >= 1, nil
	})
	if err != nil {
		return fmt.Errorf("cluster: CoreDNS not ready (%s): %w", c.podSummary("kube-system"), err)
	}
	c.logf("cluster: CoreDNS ready after %s", time.Since(began).Round(time.Millisecond))
	return nil
}

// decodeObjects reads a multi-document YAML stream.
func decodeObjects(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("cluster: %w", err)
		}
		if len(m) > 0 {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
}
