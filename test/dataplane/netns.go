package dataplane

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// nsEnv marks a process that already runs inside the private namespace.
const nsEnv = "METAL_CCM_IN_NETNS"

// unshareArgs create a user namespace in which we are root, and a network
// namespace owned by it: enough to add loopback addresses and listen on
// port 179, without privileges on the machine.
var unshareArgs = []string{"--user", "--map-root-user", "--net"}

// InNamespace reports whether this process runs inside the private network
// namespace ReexecInNamespace made.
func InNamespace() bool { return os.Getenv(nsEnv) == "1" }

// ReexecInNamespace runs this same program, with the same arguments, inside
// a new private user and network namespace, and returns its exit code. When
// the machine does not allow that, it prints one line saying what to enable
// and returns 1: the data-plane test is never skipped silently.
func ReexecInNamespace() int {
	if err := CheckNamespaces(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: "+err.Error())
		return 1
	}
	cmd := NamespaceCommand(os.Args, nil)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: running the test inside unshare: %v\n", err)
		return 1
	}
	return 0
}

// NamespaceCommand is argv run inside a new private user and network
// namespace, marked (InNamespace) and with env added. Check CheckNamespaces
// first.
func NamespaceCommand(argv, env []string) *exec.Cmd {
	args := append(append([]string{}, unshareArgs...), "--")
	cmd := exec.Command("unshare", append(args, argv...)...)
	cmd.Env = append(append(os.Environ(), env...), nsEnv+"=1")
	return cmd
}

// CheckNamespaces tries what NamespaceCommand needs and returns a one-line
// error naming what to enable (or install) when it is not allowed.
func CheckNamespaces() error {
	if _, err := exec.LookPath("unshare"); err != nil {
		return errors.New("the data plane needs unshare (util-linux) on PATH to create a private network namespace; install util-linux")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return errors.New("the data plane needs ip (iproute2) on PATH to add loopback addresses in its private network namespace; install iproute2")
	}
	var stderr bytes.Buffer
	cmd := exec.Command("unshare", append(append([]string{}, unshareArgs...), "true")...)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("this machine does not allow unprivileged user namespaces (unshare %s: %s); enable them: sysctl -w kernel.unprivileged_userns_clone=1 user.max_user_namespaces=15000 (and on Ubuntu kernel.apparmor_restrict_unprivileged_userns=0), or in a container run it with --security-opt seccomp=unconfined",
			strings.Join(unshareArgs, " "), firstLine(stderr.String(), err))
	}
	return nil
}

// AddLoopbackAddresses brings the namespace's loopback up and gives it the
// addresses as /32s or /128s: the routers' peer addresses and the nodes'
// BGP sources (private IPv4, public IPv6). Only call it inside the
// namespace.
func AddLoopbackAddresses(addrs ...string) error {
	if !InNamespace() {
		return errors.New("refusing to change loopback addresses outside the private network namespace")
	}
	if out, err := exec.Command("ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
		return fmt.Errorf("ip link set lo up: %s", firstLine(string(out), err))
	}
	for _, a := range addrs {
		// nodad: an IPv6 address is usable at once, not after duplicate
		// address detection, which a loopback has nobody to ask anyway.
		args := []string{"addr", "add", a + "/32", "dev", "lo"}
		if strings.Contains(a, ":") {
			args = []string{"-6", "addr", "add", a + "/128", "dev", "lo", "nodad"}
		}
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil && (strings.Contains(string(out), "File exists") || strings.Contains(string(out), "already assigned")) {
			continue // an earlier cluster of the same run added it
		}
		if err != nil {
			return fmt.Errorf("ip %s: %s", strings.Join(args, " "), firstLine(string(out), err))
		}
	}
	return nil
}

func firstLine(s string, err error) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return err.Error()
	}
	line, _, _ := strings.Cut(s, "\n")
	return line
}
