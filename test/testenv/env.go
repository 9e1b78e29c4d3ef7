package testenv

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Options configures Start. The zero value is a server with the MetalLB
// CRDs, an admin user and no audit log.
type Options struct {
	// AssetsDir holds kube-apiserver and etcd; default DefaultAssetsDir().
	AssetsDir string
	// Dir is the work directory (data, keys, logs, kubeconfig). Default: a
	// new temporary directory that Stop removes unless KeepDir is set. A
	// given Dir is never removed, but etcd always starts empty.
	Dir     string
	KeepDir bool
	// Users are extra token-authenticated users; see Env.UserConfig.
	Users []User
	// AuditLog turns on kube-apiserver's audit log (level Metadata, every
	// request) at Env.AuditLogPath; see Env.AuditEvents.
	AuditLog bool
	// MetalLBCRDDir overrides where MetalLB's CRDs are read from (default:
	// config/crd/bases of the go.universe.tf/metallb module in go.mod).
	MetalLBCRDDir string
	// CRDPaths are more CRD files or directories to install.
	CRDPaths []string
	// ServingIPs are more addresses kube-apiserver's serving certificate
	// names (besides 127.0.0.1 and the kubernetes Service's), for clients
	// that reach it elsewhere.
	ServingIPs []string
	// ServiceAccounts keeps kube-apiserver's ServiceAccount admission
	// plugin: pods then get their ServiceAccount's token, and need the
	// ServiceAccount to exist (kube-controller-manager makes the default
	// ones). Off, it is disabled, since nothing makes them.
	ServiceAccounts bool
	// APIServerFlags are appended to kube-apiserver's command line (a later
	// flag wins, except list flags, which add up), for example
	// "--feature-gates=...".
	APIServerFlags []string
	// Timeout bounds the start-up; default 2 minutes (a loaded 2-core
	// machine running several servers at once is slow).
	Timeout time.Duration
	// Logf receives progress lines; default none.
	Logf func(format string, args ...any)

	// pickPorts chooses n loopback ports; tests replace it to hand out a
	// taken port and exercise the retry.
	pickPorts func(n int) ([]int, error)
}

// Env is a running etcd + kube-apiserver. Stop it when done.
type Env struct {
	// Config acts as an admin (group system:masters), with client-side
	// rate limits raised to 200 QPS / 400 burst so test set-up is not
	// throttled. Copy it (rest.CopyConfig) before changing it.
	Config *rest.Config
	// KubeconfigPath is a kubeconfig for kubectl: context "testenv" is the
	// admin, and each Options.Users entry has a context of its name.
	KubeconfigPath string
	// Dir is the work directory; etcd.log and kube-apiserver.log are in it.
	Dir string
	// AuditLogPath is the audit log, "" unless Options.AuditLog.
	AuditLogPath string
	// StartDuration is how long Start took, from the call to ready.
	StartDuration time.Duration

	users     map[string]string // user name -> token
	etcd      *process
	apiserver *process
	// apiserverBin and apiserverArgs start it again (RestartAPIServer);
	// caPEM checks its certificate.
	apiserverBin  string
	apiserverArgs []string
	caPEM         []byte
	removeDir     bool
	logf          func(string, ...any)
	stopOnce      sync.Once
}

const (
	advertiseAddress = "192.0.2.1" // RFC 5737 TEST-NET-1
	portAttempts     = 5
	stopGrace        = 5 * time.Second
)

// Start runs etcd and kube-apiserver on free loopback ports, installs the
// MetalLB CRDs, and returns once the server is ready for clients (see the
// package documentation). ctx bounds the start-up only: the servers run
// until Stop (or until this process dies). On error nothing is left running
// and the work directory is kept for its logs.
func Start(ctx context.Context, opts Options) (_ *Env, err error) {
	began := time.Now()
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}

	assets := opts.AssetsDir
	if assets == "" {
		if assets, err = DefaultAssetsDir(); err != nil {
			return nil, err
		}
	}
	apiserverBin, etcdBin, err := findBinaries(assets)
	if err != nil {
		return nil, err
	}
	if err := validateUsers(opts.Users); err != nil {
		return nil, err
	}

	// Finding MetalLB's CRDs runs `go list`; do it while etcd starts.
	type crdResult struct {
		paths []string
		err   error
	}
	crdCh := make(chan crdResult, 1)
	go func() {
		dir := opts.MetalLBCRDDir
		var err error
		if dir == "" {
			dir, err = MetalLBCRDDir(ctx)
		}
		crdCh <- crdResult{append([]string{dir}, opts.CRDPaths...), err}
	}()

	if opts.pickPorts == nil {
		opts.pickPorts = freePorts
	}
	e := &Env{Dir: opts.Dir, logf: logf, users: map[string]string{}}
	if e.Dir == "" {
		if e.Dir, err = os.MkdirTemp("", "testenv-"); err != nil {
			return nil, fmt.Errorf("testenv: creating work directory: %w", err)
		}
		e.removeDir = !opts.KeepDir
	} else if err := os.MkdirAll(e.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("testenv: creating work directory: %w", err)
	}
	defer func() {
		if err != nil {
			if ctx.Err() != nil {
				err = fmt.Errorf("%w (start-up gave up after %s; logs in %s)", err, opts.Timeout, e.Dir)
			} else {
				err = fmt.Errorf("%w (logs in %s)", err, e.Dir)
			}
			e.removeDir = false // keep the logs of a failed start
			e.Stop()
		}
	}()

	files, adminToken, err := e.writeFiles(opts)
	if err != nil {
		return nil, err
	}

	etcdURL, err := e.startEtcd(ctx, etcdBin, opts.pickPorts)
	if err != nil {
		return nil, err
	}
	logf("testenv: etcd ready at %s after %s", etcdURL, time.Since(began).Round(time.Millisecond))

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(files.caPEM)
	probeClient := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: probeTimeout}
	defer probeClient.CloseIdleConnections()
	host, err := e.startAPIServer(ctx, apiserverBin, etcdURL, files, probeClient, adminToken, opts)
	if err != nil {
		return nil, err
	}
	logf("testenv: kube-apiserver serving CRDs at %s after %s", host, time.Since(began).Round(time.Millisecond))

	e.Config = &rest.Config{
		Host:            host,
		BearerToken:     adminToken,
		TLSClientConfig: rest.TLSClientConfig{CAData: files.caPEM},
		// Tests create objects in bursts; client-side throttling at the
		// default 5 QPS would only slow them down.
		QPS:   200,
		Burst: 400,
	}
	if err := e.checkVersion(assets); err != nil {
		return nil, err
	}

	crd := <-crdCh
	if crd.err != nil {
		return nil, crd.err
	}
	crds, err := readCRDs(crd.paths)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return nil, fmt.Errorf("testenv: client: %w", err)
	}
	ext, err := apiextensionsclient.NewForConfig(e.Config)
	if err != nil {
		return nil, fmt.Errorf("testenv: client: %w", err)
	}
	// The CRDs go in while kube-apiserver still bootstraps RBAC (about a
	// second): the two overlap, and the CRDs are older by the time
	// Start returns (see waitCRDs).
	if err := createCRDs(ctx, ext, crds); err != nil {
		return nil, err
	}
	if err := waitReady(ctx, e.apiserver, apiserverProbe(probeClient, host, adminToken, "/readyz")); err != nil {
		return nil, err
	}
	logf("testenv: kube-apiserver ready after %s", time.Since(began).Round(time.Millisecond))
	if err := waitCRDs(ctx, ext, cs.Discovery(), crds); err != nil {
		return nil, err
	}
	if err := ensureCluster(ctx, cs); err != nil {
		return nil, err
	}
	if err := e.writeKubeconfig(files.caPEM, adminToken, opts.Users); err != nil {
		return nil, err
	}
	e.StartDuration = time.Since(began)
	logf("testenv: ready after %s (%d CRDs; work dir %s)", e.StartDuration.Round(time.Millisecond), len(crds), e.Dir)
	return e, nil
}

type startFiles struct {
	caPEM                      []byte
	certFile, keyFile          string
	saKeyFile, saPubFile       string
	tokenFile, auditPolicyFile string
}

func (e *Env) writeFiles(opts Options) (f startFiles, adminToken string, err error) {
	km, err := newKeyMaterial(time.Now(), opts.ServingIPs)
	if err != nil {
		return f, "", err
	}
	f.caPEM = km.certPEM
	users := append([]User{adminUser}, opts.Users...)
	tokens := make([]string, len(users))
	for i, u := range users {
		if tokens[i], err = newToken(); err != nil {
			return f, "", err
		}
		e.users[u.Name] = tokens[i]
	}
	tf, err := tokenFile(users, tokens)
	if err != nil {
		return f, "", err
	}
	f.certFile = filepath.Join(e.Dir, "apiserver.crt")
	f.keyFile = filepath.Join(e.Dir, "apiserver.key")
	f.saKeyFile = filepath.Join(e.Dir, "sa.key")
	f.saPubFile = filepath.Join(e.Dir, "sa.pub")
	f.tokenFile = filepath.Join(e.Dir, "tokens.csv")
	writes := []struct {
		path string
		data []byte
	}{
		{f.certFile, km.certPEM}, {f.keyFile, km.keyPEM},
		{f.saKeyFile, km.saKeyPEM}, {f.saPubFile, km.saPublicPEM},
		{f.tokenFile, tf},
	}
	if opts.AuditLog {
		f.auditPolicyFile = filepath.Join(e.Dir, "audit-policy.yaml")
		writes = append(writes, struct {
			path string
			data []byte
		}{f.auditPolicyFile, []byte(auditPolicy)})
		e.AuditLogPath = filepath.Join(e.Dir, "audit.log")
	}
	for _, w := range writes {
		if err := os.WriteFile(w.path, w.data, 0o600); err != nil {
			return f, "", fmt.Errorf("testenv: writing %s: %w", w.path, err)
		}
	}
	return f, tokens[0], nil
}

// startEtcd starts etcd, choosing new ports if the chosen ones were taken
// meanwhile, and returns its client URL once it is healthy.
func (e *Env) startEtcd(ctx context.Context, bin string, pickPorts func(int) ([]int, error)) (string, error) {
	dataDir := filepath.Join(e.Dir, "etcd")
	suffix, err := newToken()
	if err != nil {
		return "", err
	}
	name := "testenv-" + suffix[:12]
	client := &http.Client{Timeout: probeTimeout}
	defer client.CloseIdleConnections()
	for attempt := 1; ; attempt++ {
		ports, err := pickPorts(2)
		if err != nil {
			return "", err
		}
		clientURL, peerURL := loopbackURL("http", ports[0]), loopbackURL("http", ports[1])
		if err := os.RemoveAll(dataDir); err != nil {
			return "", fmt.Errorf("testenv: clearing etcd data: %w", err)
		}
		p, err := startProcess("etcd", bin, filepath.Join(e.Dir, "etcd.log"), etcdArgs(name, dataDir, clientURL, peerURL))
		if err != nil {
			return "", err
		}
		e.etcd = p
		err = waitReady(ctx, p, etcdProbe(client, clientURL, name))
		if err == nil {
			return clientURL, nil
		}
		p.stop(stopGrace)
		var ee *earlyExit
		if !errors.As(err, &ee) || !ee.portTaken || attempt == portAttempts {
			return "", err
		}
		e.logf("testenv: etcd port taken, retrying with new ports")
	}
}

func etcdArgs(name, dataDir, clientURL, peerURL string) []string {
	return []string{
		"--name=" + name,
		"--data-dir=" + dataDir,
		"--listen-client-urls=" + clientURL,
		"--advertise-client-urls=" + clientURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=" + name + "=" + peerURL,
		// The data is thrown away: skip fsync, which dominates write latency.
		"--unsafe-no-fsync",
		// One member on loopback: elect it at once instead of after the
		// default 1 s election timeout (a third of the whole start-up).
		"--heartbeat-interval=10",
		"--election-timeout=100",
		"--log-level=warn",
	}
}

// startAPIServer starts kube-apiserver, retrying with a new port if its port
// was taken meanwhile, and returns its URL once it serves CustomResource-
// Definitions (not yet /readyz: RBAC bootstrap takes another second).
func (e *Env) startAPIServer(ctx context.Context, bin, etcdURL string, f startFiles, client *http.Client, adminToken string, opts Options) (string, error) {
	for attempt := 1; ; attempt++ {
		ports, err := opts.pickPorts(1)
		if err != nil {
			return "", err
		}
		args := apiserverArgs(apiserverConfig{
			etcdURL: etcdURL, port: ports[0], dir: e.Dir, files: f,
			auditLogPath: e.AuditLogPath, serviceAccounts: opts.ServiceAccounts,
		})
		args = append(args, opts.APIServerFlags...)
		p, err := startProcess("kube-apiserver", bin, filepath.Join(e.Dir, "kube-apiserver.log"), args)
		if err != nil {
			return "", err
		}
		e.apiserver, e.apiserverBin, e.apiserverArgs, e.caPEM = p, bin, args, f.caPEM
		host := loopbackURL("https", ports[0])
		err = waitReady(ctx, p, apiserverProbe(client, host, adminToken,
			"/readyz/poststarthook/start-apiextensions-controllers", "/readyz/poststarthook/crd-informer-synced"))
		if err == nil {
			return host, nil
		}
		p.stop(stopGrace)
		var ee *earlyExit
		if !errors.As(err, &ee) || !ee.portTaken || attempt == portAttempts {
			return "", err
		}
		e.logf("testenv: kube-apiserver port taken, retrying with a new port")
	}
}

type apiserverConfig struct {
	etcdURL      string
	port         int
	dir          string
	files        startFiles
	auditLogPath string
	// serviceAccounts: Options.ServiceAccounts.
	serviceAccounts bool
}

func apiserverArgs(c apiserverConfig) []string {
	args := []string{
		"--etcd-servers=" + c.etcdURL,
		"--bind-address=127.0.0.1",
		// The default/kubernetes endpoint. Left out, it is the host's own
		// address; 1.37 refuses loopback ("may not be in the loopback
		// range"), so it is an address reserved for documentation that no
		// test connects to (clients use Config.Host).
		"--advertise-address=" + advertiseAddress,
		"--secure-port=" + strconv.Itoa(c.port),
		"--cert-dir=" + filepath.Join(c.dir, "certs"),
		"--tls-cert-file=" + c.files.certFile,
		"--tls-private-key-file=" + c.files.keyFile,
		"--service-cluster-ip-range=" + serviceCIDR,
		// Mandatory: kube-apiserver refuses to start without them.
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + c.files.saPubFile,
		"--service-account-signing-key-file=" + c.files.saKeyFile,
		"--token-auth-file=" + c.files.tokenFile,
		// RBAC as in a real cluster; AlwaysAllow would also turn off
		// anonymous requests and hide missing rules.
		"--authorization-mode=RBAC",
		"--allow-privileged=true",
		"--profiling=false",
	}
	if !c.serviceAccounts {
		// No controller-manager creates the default ServiceAccount that
		// this plugin demands of every Pod.
		args = append(args, "--disable-admission-plugins=ServiceAccount")
	}
	if c.auditLogPath != "" {
		args = append(args,
			"--audit-policy-file="+c.files.auditPolicyFile,
			"--audit-log-path="+c.auditLogPath,
			"--audit-log-format=json",
			// Written in the request path, so a test reading the log after
			// its calls returned sees them.
			"--audit-log-mode=blocking",
		)
	}
	return args
}

// waitReady polls probe until it reports ready, the process exits, or ctx
// ends.
func waitReady(ctx context.Context, p *process, probe func(context.Context) (bool, string)) error {
	var last string
	err := wait.PollUntilContextCancel(ctx, 25*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if p.exited() {
			return false, p.earlyExit()
		}
		ok, status := probe(ctx)
		last = status
		return ok, nil
	})
	var ee *earlyExit
	if err != nil && !errors.As(err, &ee) {
		return fmt.Errorf("testenv: %s not ready (last answer: %s; log %s): %w", p.name, last, p.logPath, err)
	}
	return err
}

// probeTimeout bounds one readiness request: something else listening on a
// port that was just free (and never answering) must not stall start-up.
const probeTimeout = 2 * time.Second

// httpGet returns the status line and body of a GET (or a POST if body is
// not nil) or the error as the status.
func httpGet(ctx context.Context, client *http.Client, url, token string, body []byte) (int, string, []byte) {
	method, rd := http.MethodGet, io.Reader(nil)
	if body != nil {
		method, rd = http.MethodPost, bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, err.Error(), nil
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err.Error(), nil
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, err.Error(), nil
	}
	return resp.StatusCode, resp.Status, data
}

// etcdProbe is ready when etcd is healthy and is the member named name: a
// port taken meanwhile by another test's etcd answers /health too, and
// must not be mistaken for ours.
func etcdProbe(client *http.Client, clientURL, name string) func(context.Context) (bool, string) {
	return func(ctx context.Context) (bool, string) {
		code, status, body := httpGet(ctx, client, clientURL+"/health", "", nil)
		if code != http.StatusOK {
			return false, status
		}
		var health struct{ Health string }
		if json.Unmarshal(body, &health) != nil || health.Health != "true" {
			return false, "unhealthy: " + string(body)
		}
		code, status, body = httpGet(ctx, client, clientURL+"/v3/cluster/member/list", "", []byte("{}"))
		if code != http.StatusOK {
			return false, status
		}
		var members struct{ Members []struct{ Name string } }
		if err := json.Unmarshal(body, &members); err != nil {
			return false, "member list: " + err.Error()
		}
		if len(members.Members) != 1 || members.Members[0].Name != name {
			return false, fmt.Sprintf("%s is not our etcd %s: %s", clientURL, name, body)
		}
		return true, status
	}
}

// apiserverProbe is ready when every path (readiness checks) answers 200
// to the admin token over TLS checked against our own CA; another server on
// the port fails both.
func apiserverProbe(client *http.Client, host, token string, paths ...string) func(context.Context) (bool, string) {
	return func(ctx context.Context) (bool, string) {
		for _, path := range paths {
			code, status, _ := httpGet(ctx, client, host+path, token, nil)
			if code != http.StatusOK {
				return false, path + ": " + status
			}
		}
		return true, "ok"
	}
}

// checkVersion makes sure the binary is the version this package pins, so
// a stale or hand-placed binary is not mistaken for the real target.
func (e *Env) checkVersion(assets string) error {
	cs, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return fmt.Errorf("testenv: client: %w", err)
	}
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		return fmt.Errorf("testenv: reading server version: %w", err)
	}
	if v.GitVersion != KubernetesVersion {
		return fmt.Errorf("testenv: kube-apiserver in %s is %s, want %s: run make k8s-bins", assets, v.GitVersion, KubernetesVersion)
	}
	return nil
}

// ensureCluster makes the namespaces a cluster with MetalLB has, and waits
// for the default/kubernetes Service. kube-apiserver creates the system
// namespaces itself around the time it is ready; creating them here as well
// (AlreadyExists is fine) removes that race, and the object is the same.
func ensureCluster(ctx context.Context, cs kubernetes.Interface) error {
	for _, ns := range []string{metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease, metav1.NamespaceDefault, MetalLBNamespace} {
		_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("testenv: creating namespace %s: %w", ns, err)
		}
	}
	err := wait.PollUntilContextCancel(ctx, 25*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("testenv: waiting for the default/kubernetes Service: %w", err)
	}
	return nil
}

// MetalLBNamespace is created by Start, as MetalLB's install does.
const MetalLBNamespace = "metallb-system"

func (e *Env) writeKubeconfig(caPEM []byte, adminToken string, users []User) error {
	const cluster = "testenv"
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[cluster] = &clientcmdapi.Cluster{Server: e.Config.Host, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[adminUser.Name] = &clientcmdapi.AuthInfo{Token: adminToken}
	cfg.Contexts[cluster] = &clientcmdapi.Context{Cluster: cluster, AuthInfo: adminUser.Name}
	for _, u := range users {
		cfg.AuthInfos[u.Name] = &clientcmdapi.AuthInfo{Token: e.users[u.Name]}
		cfg.Contexts[u.Name] = &clientcmdapi.Context{Cluster: cluster, AuthInfo: u.Name}
	}
	cfg.CurrentContext = cluster
	e.KubeconfigPath = filepath.Join(e.Dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, e.KubeconfigPath); err != nil {
		return fmt.Errorf("testenv: writing kubeconfig: %w", err)
	}
	return nil
}

// UserConfig returns a rest.Config that authenticates as one of
// Options.Users (by name).
func (e *Env) UserConfig(name string) (*rest.Config, error) {
	token, ok := e.users[name]
	if !ok || name == adminUser.Name {
		return nil, fmt.Errorf("testenv: no user %q: add it to Options.Users", name)
	}
	cfg := rest.AnonymousClientConfig(e.Config)
	cfg.BearerToken = token
	return cfg, nil
}

// RestartAPIServer stops kube-apiserver as a control plane's rolling
// restart does (SIGTERM; it drains its requests) and starts it again on
// the same port with the same flags; it returns once it is ready, and how
// long it was gone. Its clients keep their address and reconnect.
func (e *Env) RestartAPIServer(ctx context.Context) (time.Duration, error) {
	began := time.Now()
	// 30 s: the grace a kubelet gives a static pod (kubeadm's
	// kube-apiserver sets none of its own).
	e.apiserver.stop(30 * time.Second)
	p, err := startProcess("kube-apiserver", e.apiserverBin, filepath.Join(e.Dir, "kube-apiserver.log"), e.apiserverArgs)
	if err != nil {
		return 0, err
	}
	e.apiserver = p
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(e.caPEM)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: probeTimeout}
	defer client.CloseIdleConnections()
	if err := waitReady(ctx, p, apiserverProbe(client, e.Config.Host, e.Config.BearerToken, "/readyz")); err != nil {
		return 0, fmt.Errorf("testenv: kube-apiserver after its restart: %w", err)
	}
	return time.Since(began), nil
}

// Stop ends kube-apiserver, then etcd, and removes the work directory if
// Start created it (and KeepDir is not set). It may be called more than
// once.
func (e *Env) Stop() {
	e.stopOnce.Do(func() {
		// State that is thrown away needs no graceful shutdown (which costs
		// kube-apiserver about a second); kept state gets one. The audit log
		// is written synchronously and the logs unbuffered, so killing loses
		// nothing of them.
		grace := stopGrace
		if e.removeDir {
			grace = 0
		}
		e.apiserver.stop(grace)
		e.etcd.stop(grace)
		if e.removeDir {
			if err := os.RemoveAll(e.Dir); err != nil {
				e.logf("testenv: removing %s: %v", e.Dir, err)
			}
		}
	})
}
