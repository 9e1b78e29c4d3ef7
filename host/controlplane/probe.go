package controlplane

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// dialFunc opens a connection; tests use it to route the EIP to whichever
// loopback server holds it, the way the Equinix network would.
type dialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// prober asks kube-apiservers whether they are healthy.
type prober struct {
	client  *http.Client
	timeout time.Duration
}

// newProber builds a prober whose every probe ends within timeout. dial may
// be nil for the ordinary dialer.
//
// Certificates are not verified: the probe asks "does an apiserver answer
// here", not "is this the apiserver I trust", and it sends no credentials.
// The serving certificate rarely names the EIP or the node's every address,
// so verification would make healthy nodes look dead. Keep-alives are off so
// that each probe sees a fresh connection, as a new client would: a kept
// connection can outlive a listener that no longer accepts. Proxies from
// the environment are ignored: a probe of a node address must go straight
// to the node.
func newProber(timeout time.Duration, dial dialFunc) *prober {
	if timeout <= 0 {
		timeout = time.Second
	}
	if dial == nil {
		dial = (&net.Dialer{Timeout: timeout}).DialContext
	}
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         dial,
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // health probe, see above
		TLSHandshakeTimeout: timeout,
		DisableKeepAlives:   true,
		ForceAttemptHTTP2:   false,
	}
	return &prober{
		client: &http.Client{
			Transport: tr,
			Timeout:   timeout,
			// A redirect is not a healthy answer; do not follow it.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		timeout: timeout,
	}
}

// healthzURL is the probe URL of an apiserver at host:port.
func healthzURL(host string, port int) string {
	return "https://" + net.JoinHostPort(host, strconv.Itoa(port)) + "/healthz"
}

// Probe returns nil when GET https://host:port/healthz answers 200 within
// the prober's timeout. Any other status, and any transport error, is a
// failure: an apiserver that answers 500 is not one to send clients to.
func (p *prober) Probe(ctx context.Context, host string, port int) error {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	u := healthzURL(host, port)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("probe %s: %w", u, err)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // the URL is in our own message already
		}
		return fmt.Errorf("probe %s: %w", u, err)
	}
	// Drain a little so the server sees a clean close, then close; upstream
	// leaked these bodies.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("probe %s: status %d, want 200", u, resp.StatusCode)
	}
	return nil
}

// ProbeAny probes every host in parallel and returns nil as soon as one
// answers 200, or the errors of all. A node often has several addresses
// (public, private, a VLAN one) and the apiserver may listen on only some
// of them (upstream issue #170): one answer is enough.
func (p *prober) ProbeAny(ctx context.Context, hosts []string, port int) error {
	if len(hosts) == 0 {
		return errors.New("the node has no address to probe")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(hosts))
	done := make(chan int, len(hosts))
	for i, h := range hosts {
		go func() {
			errs[i] = p.Probe(ctx, h, port)
			done <- i
		}()
	}
	for range hosts {
		i := <-done
		if errs[i] == nil {
			return nil
		}
	}
	return errors.Join(errs...)
}

// target is one probe to run in a round.
type target struct {
	// Key identifies the result: a node name, or "" for the EIP.
	Key   string
	Hosts []string
	Port  int
}

// ProbeAll runs every target in parallel and returns each one's error (nil
// = healthy) by key, so a round takes as long as its slowest probe, not the
// sum of them (upstream probed one node after another, 5 s each).
func (p *prober) ProbeAll(ctx context.Context, targets []target) map[string]error {
	out := make(map[string]error, len(targets))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, t := range targets {
		wg.Go(func() {
			err := p.ProbeAny(ctx, t.Hosts, t.Port)
			mu.Lock()
			out[t.Key] = err
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}
