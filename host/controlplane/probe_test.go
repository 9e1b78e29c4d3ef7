package controlplane

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestProbe(t *testing.T) {
	ok := startFakeAPIServer(t, "127.0.0.2", 0)
	bad := startFakeAPIServer(t, "127.0.0.3", 0)
	bad.setFail(func(int64) bool { return true })
	slow := startFakeAPIServer(t, "127.0.0.4", 0)
	slow.setDelay(time.Second)
	gone := startFakeAPIServer(t, "127.0.0.5", 0)
	gone.Stop()

	p := newProber(300*time.Millisecond, nil)
	tests := []struct {
		name    string
		host    string
		port    int
		wantErr string // "" = healthy
	}{
		{"200 is healthy", ok.host(), ok.port(), ""},
		{"500 is unhealthy", bad.host(), bad.port(), "status 500"},
		{"an answer slower than the timeout is unhealthy", slow.host(), slow.port(), "deadline exceeded"},
		{"a stopped server is unhealthy", gone.host(), gone.port(), "connection refused"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := p.Probe(context.Background(), tc.host, tc.port)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Probe: %v, want healthy", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Probe error = %v, want one containing %q", err, tc.wantErr)
			}
			if !strings.Contains(err.Error(), "https://"+net.JoinHostPort(tc.host, strconv.Itoa(tc.port))+"/healthz") {
				t.Errorf("error %q does not name the URL it probed", err)
			}
		})
	}
}

func TestProbeAny(t *testing.T) {
	ok := startFakeAPIServer(t, "127.0.0.2", 0)
	// Same port on another loopback address with nothing listening: a node
	// whose apiserver listens on only one of its addresses.
	p := newProber(300*time.Millisecond, nil)
	if err := p.ProbeAny(context.Background(), []string{"127.0.0.9", ok.host()}, ok.port()); err != nil {
		t.Fatalf("ProbeAny with one answering address: %v", err)
	}
	err := p.ProbeAny(context.Background(), []string{"127.0.0.9", "127.0.0.10"}, ok.port())
	if err == nil || !strings.Contains(err.Error(), "127.0.0.9") || !strings.Contains(err.Error(), "127.0.0.10") {
		t.Fatalf("ProbeAny with no answering address = %v, want both failures reported", err)
	}
	if err := p.ProbeAny(context.Background(), nil, ok.port()); err == nil {
		t.Fatal("ProbeAny with no addresses succeeded")
	}
}

func TestProbeAll(t *testing.T) {
	// Every target is probed exactly once per round, whatever the others answer.
	var targets []target
	var servers []*fakeAPIServer
	for i, ip := range []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"} {
		s := startFakeAPIServer(t, ip, 0)
		servers = append(servers, s)
		targets = append(targets, target{Key: string(rune('a' + i)), Hosts: []string{ip}, Port: s.port()})
	}
	servers[1].setFail(func(int64) bool { return true })
	got := newProber(time.Second, nil).ProbeAll(context.Background(), targets)
	if len(got) != 3 || got["a"] != nil || got["b"] == nil || got["c"] != nil {
		t.Fatalf("ProbeAll = %v, want a and c healthy, b failing", got)
	}
	for i, s := range servers {
		if n := s.requests.Load(); n != 1 {
			t.Errorf("server %d got %d requests, want exactly 1", i, n)
		}
	}
}
