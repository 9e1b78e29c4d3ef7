package dataplane

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// MetalLB's speaker in FRR mode (the mode that announces IPv6) does not
// speak BGP itself: it writes an FRR configuration file and sends SIGHUP to
// the process whose PID is in a file, MetalLB's reloader, which applies the
// file to the node's FRR with frr-reload.py. In a cluster the speaker Pod
// carries FRR and the reloader as containers. Here each node gets:
//
//   - a bgpd of its own (Debian's FRR), without zebra (-Z: the nodes share
//     one network namespace, where several zebras would fight over the
//     routing table, and a node that only announces needs none), without a
//     listening port (-p 0: the routers listen on 179 in the same
//     namespace, and only the node dials), its vty socket in its own
//     directory;
//   - this test process as its reloader: the speaker's PID file names it,
//     and on SIGHUP every node whose file changed gets it checked and
//     applied with frr-reload.py (--test, then --reload), as MetalLB's
//     reloader does.
//
// One line is added to what the speaker wrote: bgp router-id, the node's
// IPv4 address. zebra would give bgpd one from the node's interfaces; bgpd
// without zebra has none, and a BGP OPEN with router-id 0.0.0.0 is refused.
//
// With BFD (StartFRRBFD) a node runs FRR's bfdd and zebra beside bgpd, as
// MetalLB's FRR container does: bgpd asks bfdd for its peers' BFD sessions
// through zebra, so BFD needs both. That is for a node with a netns of its
// own (a real cluster's), where one zebra owns its routing table. zebra and
// bfdd refuse to run as root outside FRR's vty group, so they run as FRR's
// user, and every daemon's vty socket is in a directory of its group's.
// frr-reload.py then reloads every daemon, not bgpd alone:
// MetalLB's BFD profiles are bfdd's configuration.
//
// MetalLB's reloader also writes the result to /etc/frr_reloader/.status,
// a path the speaker reads fixed; the speaker ignores a missing file, and
// the result goes to the node's frr-reload.log instead.

// FRR is one node's bgpd and the files its speaker and reloader share.
type FRR struct {
	Node string
	Dir  string // frr.conf (the speaker's), reloader.pid, the vty socket, logs
	// vty is where the daemons' vty sockets (and, with BFD, their pid
	// files and zebra's socket) are: Dir, or with BFD a directory FRR's
	// user can reach (startBFD).
	vty      string
	routerID string
	bins     Binaries
	bgpd     *Proc
	// zebra and bfdd run with BFD only (StartFRRBFD).
	zebra, bfdd *Proc
	ports       int32 // the speaker's metrics port; health is the next

	mu      sync.Mutex // one reload at a time
	applied []byte     // the speaker's file as last applied

	// versions are the speaker's files as this process saw them, the
	// latest last (at most maxVersions): what the stage table reads to
	// split a speaker's way to its routers into writing and reloading.
	vmu      sync.Mutex
	versions []configVersion
}

// A configVersion is one content of the speaker's file: when this process
// first read it (at the speaker's SIGHUP, or when a reload began) and
// when frr-reload.py finished applying it (zero: never, a later version
// came first).
type configVersion struct {
	Read, Applied time.Time
	conf          []byte
}

// maxVersions bounds the history: a 50-Service burst makes a few dozen.
const maxVersions = 400

// note records conf as read at t, unless it is the latest version
// already, and returns the version's index.
func (f *FRR) note(conf []byte, t time.Time) int {
	f.vmu.Lock()
	defer f.vmu.Unlock()
	if n := len(f.versions); n > 0 && bytes.Equal(f.versions[n-1].conf, conf) {
		return n - 1
	}
	if len(f.versions) == maxVersions {
		f.versions = slices.Delete(f.versions, 0, maxVersions/4)
	}
	f.versions = append(f.versions, configVersion{Read: t, conf: conf})
	return len(f.versions) - 1
}

// noteApplied marks the latest version with conf applied at t.
func (f *FRR) noteApplied(conf []byte, t time.Time) {
	f.vmu.Lock()
	defer f.vmu.Unlock()
	for i := len(f.versions) - 1; i >= 0; i-- {
		if bytes.Equal(f.versions[i].conf, conf) {
			if f.versions[i].Applied.IsZero() {
				f.versions[i].Applied = t
			}
			return
		}
	}
}

// FirstWith is when the speaker's file first held line (read), and when
// a file holding it was first applied, among the versions read at or
// after since. A zero time: not (yet).
func (f *FRR) FirstWith(line string, since time.Time) (read, applied time.Time) {
	f.vmu.Lock()
	defer f.vmu.Unlock()
	for _, v := range f.versions {
		if v.Read.Before(since) || !bytes.Contains(v.conf, []byte(line)) {
			continue
		}
		if read.IsZero() {
			read = v.Read
		}
		if !v.Applied.IsZero() && (applied.IsZero() || v.Applied.Before(applied)) {
			applied = v.Applied
		}
	}
	return read, applied
}

// noteWritten reads the speaker's file as it is now: its time is the
// speaker's SIGHUP's.
func (f *FRR) noteWritten(t time.Time) {
	if conf, err := os.ReadFile(f.configFile()); err == nil {
		f.note(conf, t)
	}
}

// CheckFRR says what is missing for FRR mode, naming the fix.
func (b Binaries) CheckFRR() error {
	if b.FRR == "" || b.FRRSpeaker == "" {
		return fmt.Errorf("%s or %s is not set: run make e2e, which installs Debian's frr, builds MetalLB for FRR mode and sets them", EnvFRR, EnvMetalLBFRR)
	}
	var missing []string
	for _, f := range []string{filepath.Join(b.FRR, "bgpd"), filepath.Join(b.FRR, "frr-reload.py"), b.FRRController, b.FRRSpeaker} {
		if _, err := os.Stat(f); err != nil {
			missing = append(missing, f)
		}
	}
	if _, err := exec.LookPath("vtysh"); err != nil {
		missing = append(missing, "vtysh on PATH")
	}
	if _, err := exec.LookPath("python3"); err != nil {
		missing = append(missing, "python3 on PATH")
	}
	if len(missing) > 0 {
		return fmt.Errorf("FRR mode needs %v: make e2e installs the Debian packages frr and frr-pythontools and builds MetalLB", missing)
	}
	return nil
}

// StartFRR runs the node's bgpd with an empty configuration and makes this
// process its reloader. routerID is the node's IPv4 address.
func StartFRR(bins Binaries, dir, node, routerID string) (*FRR, error) {
	return StartFRRIn("", bins, dir, node, routerID)
}

// StartFRRIn is StartFRR with bgpd in the network namespace netns (a name
// under /run/netns; "" is this process's): a real cluster's node, which
// has a netns of its own. frr-reload.py reaches bgpd by its vty socket,
// a file, from any netns.
func StartFRRIn(netns string, bins Binaries, dir, node, routerID string) (*FRR, error) {
	return startFRR(netns, bins, dir, node, routerID, false)
}

// StartFRRBFD is StartFRRIn with bfdd and zebra beside bgpd, so that the
// speaker's BFD profiles run. netns must be the node's own.
func StartFRRBFD(netns string, bins Binaries, dir, node, routerID string) (*FRR, error) {
	if netns == "" {
		return nil, fmt.Errorf("FRR with BFD for %s: zebra needs a network namespace of the node's own", node)
	}
	return startFRR(netns, bins, dir, node, routerID, true)
}

func startFRR(netns string, bins Binaries, dir, node, routerID string, bfd bool) (*FRR, error) {
	if err := bins.CheckFRR(); err != nil {
		return nil, err
	}
	f := &FRR{Node: node, Dir: filepath.Join(dir, "frr-"+node), routerID: routerID, bins: bins,
		ports: frrPortBase + 2*frrPorts.Add(1)}
	if err := os.MkdirAll(f.Dir, 0o700); err != nil {
		return nil, err
	}
	f.vty = f.Dir
	initial := filepath.Join(f.Dir, "bgpd-initial.conf")
	if err := os.WriteFile(initial, []byte("hostname "+node+"\n"), 0o600); err != nil {
		return nil, err
	}
	// No trailing newline: the speaker parses the file with Atoi.
	if err := os.WriteFile(f.pidFile(), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		return nil, err
	}
	zebra := []string{"--no_zebra"}
	if bfd {
		if err := f.startBFD(netns, dir); err != nil {
			f.Stop()
			return nil, err
		}
		zebra = []string{"--socket", f.zserv()}
	}
	p, err := f.startDaemon(netns, dir, "bgpd", append(zebra, "--skip_runas", "--bgp_port", "0", "--vty_port", "0",
		"--vty_socket", f.vty, "--pid_file", filepath.Join(f.vty, "bgpd.pid"),
		"--config_file", initial, "--log", "stdout"))
	if err != nil {
		f.Stop()
		return nil, err
	}
	f.bgpd = p
	reloaders.add(f)
	return f, nil
}

// startBFD starts the node's zebra, then its bfdd, as FRR's user (see
// the package comment). Their sockets, and bgpd's, go to a directory of
// FRR's group under the system's temporary directory: the caller's dir
// may be one FRR's user cannot reach.
func (f *FRR) startBFD(netns, dir string) error {
	g, err := user.LookupGroup("frr")
	if err != nil {
		return fmt.Errorf("FRR with BFD: %v; the Debian package frr creates FRR's user and group", err)
	}
	gid, _ := strconv.Atoi(g.Gid)
	if f.vty, err = os.MkdirTemp("", "frr-"+f.Node+"-"); err != nil {
		return err
	}
	if err := os.Chown(f.vty, -1, gid); err != nil {
		return err
	}
	if err := os.Chmod(f.vty, 0o770); err != nil {
		return err
	}
	initial := filepath.Join(f.vty, "daemons-initial.conf")
	if err := os.WriteFile(initial, []byte("hostname "+f.Node+"\n"), 0o644); err != nil {
		return err
	}
	common := []string{"--user", "frr", "--group", "frr", "--vty_port", "0", "--vty_socket", f.vty,
		"--socket", f.zserv(), "--config_file", initial, "--log", "stdout"}
	if f.zebra, err = f.startDaemon(netns, dir, "zebra", append(common, "--pid_file", filepath.Join(f.vty, "zebra.pid"))); err != nil {
		return err
	}
	f.bfdd, err = f.startDaemon(netns, dir, "bfdd", append(common, "--pid_file", filepath.Join(f.vty, "bfdd.pid"),
		"--bfdctl", filepath.Join(f.vty, "bfdd.sock")))
	return err
}

// startDaemon runs FRR's daemon in netns and waits for its vty socket.
func (f *FRR) startDaemon(netns, dir, daemon string, args []string) (*Proc, error) {
	bin := filepath.Join(f.bins.FRR, daemon)
	if netns != "" {
		// nsenter execs the daemon: the process Stop ends is the daemon.
		bin, args = "nsenter", append([]string{"--net=/run/netns/" + netns, "--", bin}, args...)
	}
	p, err := Start(dir, daemon+"-"+f.Node, bin, args, nil)
	if err != nil {
		return nil, err
	}
	if err := f.waitVTY(daemon, p); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

func (f *FRR) zserv() string { return filepath.Join(f.vty, "zserv.api") }

// SpeakerEnv is what MetalLB's speaker needs to drive this FRR.
func (f *FRR) SpeakerEnv() []string {
	return []string{"METALLB_BGP_TYPE=frr", "FRR_CONFIG_FILE=" + f.configFile(), "FRR_RELOADER_PID_FILE=" + f.pidFile()}
}

// SpeakerArgs are the speaker's own metrics and health ports: MetalLB 0.16
// binds them on every address, where the other nodes' speakers are too.
func (f *FRR) SpeakerArgs() []string {
	return []string{fmt.Sprintf("--port=%d", f.ports), fmt.Sprintf("--health-probe-port=%d", f.ports+1)}
}

// frrPorts hands each FRR node two ports for its speaker, below the
// ephemeral range and apart from the controller's (7471, 17472).
var frrPorts atomic.Int32

const frrPortBase = 17600

// Stop ends bgpd (its sessions close), bfdd and zebra, and the reloading.
func (f *FRR) Stop() {
	reloaders.remove(f)
	f.bgpd.Stop()
	f.bfdd.Stop()
	f.zebra.Stop()
	if f.vty != f.Dir {
		_ = os.RemoveAll(f.vty)
	}
}

func (f *FRR) configFile() string { return filepath.Join(f.Dir, "frr.conf") }
func (f *FRR) pidFile() string    { return filepath.Join(f.Dir, "reloader.pid") }

// waitVTY waits for the daemon's vty socket, where frr-reload.py talks to
// it.
func (f *FRR) waitVTY(daemon string, p *Proc) error {
	sock := filepath.Join(f.vty, daemon+".vty")
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			return nil
		}
		if done, err := p.Exited(); done {
			return fmt.Errorf("%s for %s exited (%v); see %s", daemon, f.Node, err, p.Log)
		}
	}
	return fmt.Errorf("%s for %s: no vty socket %s after 20s; see %s", daemon, f.Node, sock, p.Log)
}

// reload applies the speaker's file when it changed since the last time,
// and logs what frr-reload.py said to frr-reload.log.
func (f *FRR) reload() {
	f.mu.Lock()
	defer f.mu.Unlock()
	conf, err := os.ReadFile(f.configFile())
	if err != nil || bytes.Equal(conf, f.applied) {
		return // not written yet, or applied already
	}
	f.note(conf, time.Now())
	err = f.apply(conf)
	if err == nil {
		f.noteApplied(conf, time.Now())
	}
	logf, lerr := os.OpenFile(filepath.Join(f.Dir, "frr-reload.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if lerr == nil {
		defer logf.Close()
		status := "success"
		if err != nil {
			status = "failure: " + err.Error()
		}
		fmt.Fprintf(logf, "%s %s\n", time.Now().Format(time.RFC3339Nano), status)
	}
	if err == nil {
		f.applied = conf
	}
}

// Reloads counts the speaker's files applied to bgpd so far.
func (f *FRR) Reloads() int {
	b, _ := os.ReadFile(filepath.Join(f.Dir, "frr-reload.log"))
	return bytes.Count(b, []byte(" success\n"))
}

func (f *FRR) apply(conf []byte) error {
	withID := filepath.Join(f.Dir, "frr-applied.conf")
	if err := os.WriteFile(withID, WithRouterID(WithMultihopTTL(conf), f.routerID), 0o600); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	vtysh, _ := exec.LookPath("vtysh")
	run := filepath.Join(f.Dir, "run")
	if err := os.MkdirAll(run, 0o700); err != nil {
		return err
	}
	args := []string{filepath.Join(f.bins.FRR, "frr-reload.py"), "--stdout",
		"--vty_socket", f.vty, "--bindir", filepath.Dir(vtysh), "--confdir", f.vty, "--rundir", run}
	// Reloading every daemon, frr-reload.py ends with vtysh's write, which
	// saves the running configuration as <confdir>/frr.conf: with BFD the
	// confdir is the sockets' directory, not the one where the speaker
	// writes its frr.conf.
	if f.bfdd == nil {
		args = append(args, "--daemon", "bgpd")
	}
	// MetalLB's reloader (frr-tools/reloader/frr-reloader.sh) checks the
	// file with --test before it applies it with --reload, and so does
	// the stand-in: the check's time is part of every reload's.
	var out []byte
	var err error
	for _, mode := range []string{"--test", "--reload"} {
		var o []byte
		o, err = exec.CommandContext(ctx, "python3", append(slices.Clone(args), mode, withID)...).CombinedOutput()
		out = append(out, o...)
		if err != nil {
			err = fmt.Errorf("frr-reload.py %s: %v (output in %s)", mode, err, filepath.Join(f.Dir, "frr-reload.out"))
			break
		}
	}
	// frr-reload.py prints the lines it applies, the BGP password's too;
	// MetalLB's reloader blanks it the same way.
	_ = os.WriteFile(filepath.Join(f.Dir, "frr-reload.out"), passwordLine.ReplaceAll(out, []byte("password <retracted>")), 0o600)
	return err
}

var passwordLine = regexp.MustCompile(`password .*`)

// routerBGP is a `router bgp <asn>` line of the default VRF.
var routerBGP = regexp.MustCompile(`(?m)^router bgp [0-9]+[ \t]*$`)

// WithRouterID adds `bgp router-id id` under each `router bgp` of the
// default VRF that sets none, where zebra would have supplied one.
func WithRouterID(conf []byte, id string) []byte {
	if bytes.Contains(conf, []byte("bgp router-id")) {
		return conf
	}
	return routerBGP.ReplaceAllFunc(conf, func(line []byte) []byte {
		return append(append([]byte{}, line...), []byte("\n  bgp router-id "+id)...)
	})
}

// bareMultihop is a `neighbor X ebgp-multihop` line without a TTL.
var bareMultihop = regexp.MustCompile(`(?m)^([ \t]*neighbor [^ \t\n]+ ebgp-multihop)[ \t]*$`)

// WithMultihopTTL writes MetalLB's bare `neighbor X ebgp-multihop` (a BGPPeer
// with ebgpMultiHop) as `ebgp-multihop 255`, the same setting in the form
// Debian's bgpd 8.4.4 prints it in its running configuration. Its
// frr-reload.py compares lines as text, so the bare form differed on every
// reload: it removed multihop and added it back, and bgpd reset the session
// at each step. The FRR of MetalLB's own images (10.4.3 for FRR-K8s, 10.5.3
// for FRR mode) never does: bgpd prints the bare form from 8.4.5, 9.0.1
// and 9.1 on, and frr-reload.py treats the two forms as one from 10.0.4
// on. So the stand-in reloads as MetalLB's reloader does with its image.
func WithMultihopTTL(conf []byte) []byte {
	return bareMultihop.ReplaceAll(conf, []byte("${1} 255"))
}

// reloaders is the set of FRRs this process reloads on SIGHUP.
var reloaders = &hupReloaders{}

type hupReloaders struct {
	mu    sync.Mutex
	frrs  map[*FRR]bool
	start sync.Once
}

func (r *hupReloaders) add(f *FRR) {
	r.start.Do(func() {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGHUP)
		go func() {
			for range ch {
				now := time.Now()
				r.mu.Lock()
				for f := range r.frrs {
					f.noteWritten(now)
					go f.reload()
				}
				r.mu.Unlock()
			}
		}()
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.frrs == nil {
		r.frrs = map[*FRR]bool{}
	}
	r.frrs[f] = true
}

func (r *hupReloaders) remove(f *FRR) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.frrs, f)
}
