package controlplane

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeAPIServer is a TLS /healthz endpoint on a loopback address, standing
// in for one control-plane node's kube-apiserver. It can be stopped and
// started again on the same address, and told to fail some answers.
type fakeAPIServer struct {
	t    testing.TB
	addr string

	mu  sync.Mutex
	srv *httptest.Server
	// fail decides, from the 1-based request number, whether to answer 500.
	fail func(n int64) bool
	// delay is added before every answer.
	delay time.Duration

	requests atomic.Int64
}

// startFakeAPIServer listens on ip:port (port 0 = any) with TLS.
func startFakeAPIServer(t testing.TB, ip string, port int) *fakeAPIServer {
	t.Helper()
	s := &fakeAPIServer{t: t}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
	if err != nil {
		t.Fatalf("listen on %s:%d: %v (loopback addresses other than 127.0.0.1 need Linux)", ip, port, err)
	}
	s.addr = ln.Addr().String()
	s.serve(ln)
	t.Cleanup(s.Stop)
	return s
}

func (s *fakeAPIServer) serve(ln net.Listener) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := s.requests.Add(1)
		s.mu.Lock()
		fail, delay := s.fail, s.delay
		s.mu.Unlock()
		if delay > 0 {
			// A hung apiserver: the answer comes late, or never if the
			// prober gives up first (its connection closes).
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				return
			}
		}
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		if fail != nil && fail(n) {
			http.Error(w, "[-]etcd failed", http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte("ok"))
	}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Config.ErrorLog = nil
	srv.StartTLS()
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
}

func (s *fakeAPIServer) host() string { h, _, _ := net.SplitHostPort(s.addr); return h }
func (s *fakeAPIServer) port() int {
	_, p, _ := net.SplitHostPort(s.addr)
	n, _ := strconv.Atoi(p)
	return n
}

// Stop closes the listener and every connection: the apiserver is gone.
func (s *fakeAPIServer) Stop() {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	s.mu.Unlock()
	if srv != nil {
		srv.CloseClientConnections()
		srv.Close()
	}
}

// Start serves again on the same address.
func (s *fakeAPIServer) Start() {
	s.t.Helper()
	var ln net.Listener
	var err error
	for range 50 { // the port may linger for a moment after Close
		if ln, err = net.Listen("tcp", s.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		s.t.Fatalf("listen again on %s: %v", s.addr, err)
	}
	s.serve(ln)
}

func (s *fakeAPIServer) setFail(f func(n int64) bool) {
	s.mu.Lock()
	s.fail = f
	s.mu.Unlock()
}

func (s *fakeAPIServer) setDelay(d time.Duration) {
	s.mu.Lock()
	s.delay = d
	s.mu.Unlock()
}
