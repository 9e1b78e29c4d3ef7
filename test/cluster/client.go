//go:build linux

package cluster

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// inNetNS runs fn on an OS thread moved into the named netns. A socket
// keeps the netns it was made in, so connections dialled inside fn stay
// there after it returns. If the thread cannot be moved back it is never
// unlocked, so the runtime retires it with the goroutine.
func inNetNS(ns string, fn func() error) error {
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("cluster: %w", err)
	}
	defer orig.Close()
	target, err := os.Open("/run/netns/" + ns)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("cluster: %w", err)
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("cluster: entering netns %s: %w", ns, err)
	}
	ferr := fn()
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err == nil {
		runtime.UnlockOSThread()
	}
	return ferr
}

// Dial opens a connection from the client netns (src "" = ClientIP, or
// ClientIP6 to an IPv6 address).
func (c *Cluster) Dial(ctx context.Context, network, src, addr string) (net.Conn, error) {
	if src == "" {
		src = ClientIP
		if host, _, err := net.SplitHostPort(addr); err == nil && strings.Contains(host, ":") {
			src = ClientIP6
		}
	}
	d := net.Dialer{Timeout: 3 * time.Second}
	switch network {
	case "tcp", "tcp4", "tcp6":
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(src)}
	case "udp", "udp4", "udp6":
		d.LocalAddr = &net.UDPAddr{IP: net.ParseIP(src)}
	}
	var conn net.Conn
	err := inNetNS(c.ClientNS, func() error {
		var err error
		conn, err = d.DialContext(ctx, network, addr)
		return err
	})
	return conn, err
}

// ClientHTTP is an HTTP client in the client netns whose requests come
// from src ("" = ClientIP), one connection per request (a new flow each).
func (c *Cluster) ClientHTTP(src string, timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			DisableKeepAlives: true,
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				return c.Dial(ctx, network, src, addr)
			},
		},
	}
}

// UDPExchange sends msg from src to addr in the client netns and returns
// the first answer.
func (c *Cluster) UDPExchange(src, addr, msg string, timeout time.Duration) (string, error) {
	conn, err := c.Dial(context.Background(), "udp", src, addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if _, err := conn.Write([]byte(msg)); err != nil {
		return "", err
	}
	buf := make([]byte, 1024)
	n, err := conn.Read(buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// KubeThrough is an admin clientset whose requests leave the client netns
// for addr (host:port), checking kube-apiserver's certificate as the
// nodes do: what a user outside the cluster reaches through the
// control-plane Elastic IP.
func (c *Cluster) KubeThrough(addr string) (*kubernetes.Clientset, error) {
	cfg := rest.CopyConfig(c.Env.Config)
	cfg.Host = "https://" + addr
	cfg.TLSClientConfig.ServerName = "localhost"
	cfg.Timeout = 5 * time.Second
	cfg.Dial = func(ctx context.Context, network, a string) (net.Conn, error) {
		return c.Dial(ctx, network, "", a)
	}
	return kubernetes.NewForConfig(cfg)
}
