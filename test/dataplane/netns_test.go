package dataplane

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckNamespacesSaysWhatToEnable: on a machine that refuses
// unprivileged user namespaces, the data-plane test fails with one line
// naming what to enable, never a silent skip. unshare and ip are replaced by
// scripts that behave as they do on such a machine.
func TestCheckNamespacesSaysWhatToEnable(t *testing.T) {
	bin := t.TempDir()
	write := func(name, script string) {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("ip", "exit 0")
	write("unshare", "echo 'unshare: unshare failed: Operation not permitted' >&2; exit 1")
	t.Setenv("PATH", bin)

	err := CheckNamespaces()
	if err == nil {
		t.Fatal("no error although unshare is refused")
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") {
		t.Errorf("not one line: %q", msg)
	}
	for _, want := range []string{"Operation not permitted", "kernel.unprivileged_userns_clone=1", "user.max_user_namespaces"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the message does not say %q: %s", want, msg)
		}
	}

	write("unshare", "exit 0")
	if err := CheckNamespaces(); err != nil {
		t.Errorf("unshare allowed, yet: %v", err)
	}
	if err := os.Remove(filepath.Join(bin, "ip")); err != nil {
		t.Fatal(err)
	}
	if err := CheckNamespaces(); err == nil || !strings.Contains(err.Error(), "iproute2") {
		t.Errorf("without ip: %v; want a message naming iproute2", err)
	}
}

func TestParseRIB(t *testing.T) {
	// gobgp global rib -j, as v3.37 prints it (trimmed).
	out := []byte(`{"198.18.0.6/32":[` +
		`{"nlri":{"prefix":"198.18.0.6/32"},"age":1,"best":true,"attrs":[{"type":1,"value":0},{"type":2,"as_paths":[{"segment_type":2,"num":1,"asns":[65000]}]},{"type":3,"nexthop":"198.51.100.3"}],"stale":false,"source-id":"198.51.100.3","neighbor-ip":"198.51.100.3"},` +
		`{"nlri":{"prefix":"198.18.0.6/32"},"age":1,"best":false,"attrs":[{"type":1,"value":0},{"type":2,"as_paths":[{"segment_type":2,"num":1,"asns":[65000]}]},{"type":3,"nexthop":"198.51.100.1"}],"stale":false,"source-id":"198.51.100.1","neighbor-ip":"198.51.100.1"}]}`)
	rs, err := parseRIB(out)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rs.NextHops("198.18.0.6/32"), ","); got != "198.51.100.1,198.51.100.3" {
		t.Errorf("next hops %s", got)
	}
	if p := rs["198.18.0.6/32"][0]; len(p.ASPath) != 1 || p.ASPath[0] != 65000 {
		t.Errorf("AS path %v", p.ASPath)
	}
	if _, err := parseRIB([]byte("not json")); err == nil {
		t.Error("garbage parsed")
	}
	// gobgp global rib -a ipv6 -j, a route from FRR's bgpd: the next hop
	// is in MP_REACH_NLRI (type 14), not NEXT_HOP.
	out6 := []byte(`{"2001:db8:5::5/128":[{"nlri":{"prefix":"2001:db8:5::5/128"},"age":1,"best":true,"attrs":[{"type":1,"value":0},` +
		`{"type":2,"as_paths":[{"segment_type":2,"num":1,"asns":[65000]}]},{"type":4,"metric":0},` +
		`{"type":14,"nexthop":"2001:db8::1","afi":2,"safi":1,"value":[{"prefix":"2001:db8:5::5/128"}]}],"stale":false,"source-id":"10.0.0.1","neighbor-ip":"2001:db8::1"}]}`)
	rs6, err := parseRIB(out6)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rs6.NextHops("2001:db8:5::5/128"), ","); got != "2001:db8::1" {
		t.Errorf("IPv6 next hops %q, want 2001:db8::1", got)
	}
}

// TestForward: bytes go both ways through a TCP -> Unix socket -> TCP
// chain, as the sandbox's kubectl port crosses the namespace.
func TestForward(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	sock := filepath.Join(t.TempDir(), "fwd.sock")
	inner, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer inner.Close()
	go Forward(inner, func() (net.Conn, error) { return net.Dial("tcp", echo.Addr().String()) })
	outer, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer outer.Close()
	go Forward(outer, func() (net.Conn, error) { return net.Dial("unix", sock) })

	c, err := net.Dial("tcp", outer.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("hello through the namespace")); err != nil {
		t.Fatal(err)
	}
	_ = c.(*net.TCPConn).CloseWrite()
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "hello through the namespace" {
		t.Fatalf("read %q, %v", got, err)
	}
}
