package dataplane

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
)

// HealthServers answer /healthz (TLS) on each control-plane node's own
// address and the apiserver's port, as each node's kube-apiserver would;
// Stop one to make its node unhealthy.
type HealthServers struct {
	mu      sync.Mutex
	servers map[string]*httptest.Server // by node name
}

// StartHealthServers listens on addr:port for each node (name -> address).
func StartHealthServers(nodes map[string]string, port int) (*HealthServers, error) {
	h := &HealthServers{servers: map[string]*httptest.Server{}}
	for name, addr := range nodes {
		ln, err := net.Listen("tcp", net.JoinHostPort(addr, fmt.Sprint(port)))
		if err != nil {
			h.StopAll()
			return nil, fmt.Errorf("listening on %s:%d for %s's /healthz: %w", addr, port, name, err)
		}
		s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/healthz" {
				_, _ = w.Write([]byte("ok"))
				return
			}
			http.NotFound(w, r)
		}))
		s.Listener = ln
		s.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
		s.StartTLS()
		h.servers[name] = s
	}
	return h, nil
}

// Stop ends one node's server, as if its kube-apiserver died: its health
// checks fail from now on.
func (h *HealthServers) Stop(node string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	s, ok := h.servers[node]
	if !ok {
		return fmt.Errorf("no /healthz is served for node %q", node)
	}
	s.Close()
	delete(h.servers, node)
	return nil
}

// StopAll ends every server.
func (h *HealthServers) StopAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for n, s := range h.servers {
		s.Close()
		delete(h.servers, n)
	}
}
