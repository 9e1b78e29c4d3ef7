package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"
)

// serviceCIDR is the Service ClusterIP range; its first address is the
// default/kubernetes Service, which the serving certificate names too.
const (
	serviceCIDR     = "10.0.0.0/24"
	kubernetesSvcIP = "10.0.0.1"
)

// keyMaterial is what kube-apiserver needs for TLS and service-account
// tokens, made here rather than by kube-apiserver so the client knows the CA
// before the server starts. ECDSA P-256 because generating an RSA key costs
// a noticeable part of a 2-second start.
type keyMaterial struct {
	certPEM, keyPEM       []byte // serving certificate (self-signed, so also the CA) and its key
	saKeyPEM, saPublicPEM []byte // service-account token signing key pair
}

func newKeyMaterial(now time.Time, extraIPs []string) (keyMaterial, error) {
	var m keyMaterial
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return m, fmt.Errorf("testenv: generating serving key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return m, fmt.Errorf("testenv: generating serial: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "testenv-kube-apiserver"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(kubernetesSvcIP)},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
	}
	for _, ip := range extraIPs {
		a := net.ParseIP(ip)
		if a == nil {
			return m, fmt.Errorf("testenv: ServingIPs: %q is not an IP address", ip)
		}
		tmpl.IPAddresses = append(tmpl.IPAddresses, a)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return m, fmt.Errorf("testenv: creating serving certificate: %w", err)
	}
	m.certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if m.keyPEM, err = ecKeyPEM(key); err != nil {
		return m, err
	}

	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return m, fmt.Errorf("testenv: generating service-account key: %w", err)
	}
	if m.saKeyPEM, err = ecKeyPEM(saKey); err != nil {
		return m, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return m, fmt.Errorf("testenv: encoding service-account public key: %w", err)
	}
	m.saPublicPEM = pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})
	return m, nil
}

func ecKeyPEM(k *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return nil, fmt.Errorf("testenv: encoding key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

// newToken returns a random bearer token.
func newToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("testenv: generating token: %w", err)
	}
	return hex.EncodeToString(b), nil
}
