// Package guide runs a guide's shell commands as a person at a shell
// would, with Helm's library and client-go in place of the helm and kubectl
// commands (the same actions the CLI runs): the migration guide's Helm path
// is run as printed by host/provider (against kube-apiserver, the CCM
// in-process) and by test/cluster (in a real cluster, the CCM as the chart's
// Deployment, under traffic). It knows the commands the guide uses and
// nothing else: a command it does not know fails the test, so the guide
// cannot drift from what is tested.
package guide

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/kube"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// The migration guide, from a package two directories below the
// repository's root, and the sections of it whose shell blocks Shell runs.
const (
	MigrationGuide = "../../docs/migrating-from-upstream.md"
	HelmSwitch     = "### You installed upstream with Helm"
	Rollback       = "Rollback with Helm"
)

// Commands are the commands of the first ```sh block after marker in the
// guide at path: continuation lines joined, comments dropped, one per
// entry.
func Commands(t testing.TB, path, marker string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), marker)
	if !ok {
		t.Fatalf("%s has no %q", path, marker)
	}
	_, rest, ok = strings.Cut(rest, "```sh\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatalf("%s: no ```sh block after %q", path, marker)
	}
	var cmds []string
	var cur string
	for _, line := range strings.Split(block, "\n") {
		line = stripComment(line)
		if c, ok := strings.CutSuffix(strings.TrimRight(line, " "), `\`); ok {
			cur += c
			continue
		}
		cur = strings.TrimSpace(cur + line)
		if cur != "" {
			cmds = append(cmds, strings.Join(strings.Fields(cur), " "))
		}
		cur = ""
	}
	return cmds
}

// stripComment drops a # comment (a # at the start of a word, outside
// quotes) from a shell line.
func stripComment(line string) string {
	var quote rune
	for i, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
			return line[:i]
		}
	}
	return line
}

// Shell runs a guide's commands against the cluster of Kubeconfig.
type Shell struct {
	T          testing.TB
	Ctx        context.Context
	Kubeconfig string
	Kube       kubernetes.Interface
	// Chart is what bin/deploy/chart stands for (this repository's chart,
	// its image the one make image built).
	Chart *chartv2.Chart
	// Answers are what the person types where the guide says to: the
	// variables it tells them to set (RELEASE, NS: the release's, as the
	// list shows it) and the <placeholders> it has them fill in.
	Answers map[string]string
	Vars    map[string]string
	// Files are the files the commands wrote (> file), by name.
	Files map[string][]byte
}

// HelmIn is Helm's configuration for namespace ns ("" for all), as the
// helm command builds it from the kubeconfig and --namespace.
func HelmIn(t testing.TB, kubeconfig, ns string) *action.Configuration {
	t.Helper()
	cfg, err := HelmConfig(kubeconfig, ns)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// HelmConfig is HelmIn for code without a test at hand.
func HelmConfig(kubeconfig, ns string) (*action.Configuration, error) {
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig, flags.Namespace = ptr.To(kubeconfig), ptr.To(ns)
	cfg := action.NewConfiguration()
	cfg.SetLogger(slog.NewTextHandler(io.Discard, nil))
	if err := cfg.Init(flags, ns, "secret"); err != nil {
		return nil, fmt.Errorf("helm in %s: %w", ns, err)
	}
	return cfg, nil
}

// words splits a command into words as sh would: quotes removed, $VAR
// expanded outside single quotes; | and > stay words of their own.
func (sh *Shell) words(cmd string) []string {
	var out []string
	var cur strings.Builder
	inWord := false
	var quote byte
	for i := 0; i < len(cmd); i++ {
		c := cmd[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case c == '"' && quote == '"':
			quote = 0
		case (c == '\'' || c == '"') && quote == 0:
			quote, inWord = c, true
		case c == '$' && i+1 < len(cmd) && (cmd[i+1] == '_' || cmd[i+1] >= 'A' && cmd[i+1] <= 'Z'):
			j := i + 1
			for j < len(cmd) && (cmd[j] == '_' || cmd[j] >= 'A' && cmd[j] <= 'Z' || cmd[j] >= '0' && cmd[j] <= '9') {
				j++
			}
			cur.WriteString(sh.Vars[cmd[i+1:j]])
			i, inWord = j-1, true
		case c == ' ' && quote == 0:
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	for i, x := range out {
		if strings.HasPrefix(x, "<") && strings.HasSuffix(x, ">") && len(x) > 2 {
			ans, ok := sh.Answers[x]
			if !ok {
				sh.T.Fatalf("guide: %q has the placeholder %s, which this test has no answer for", cmd, x)
			}
			out[i] = ans
		}
	}
	return out
}

var (
	assignment = regexp.MustCompile(`^([A-Z_][A-Z0-9_]*)=\$\((.*)\)$`)
	shellVar   = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=`)
)

// RunAll runs cmds[from:] in order and stops at the first that fails, as
// a careful person (or sh -e) would: the index of the failed command, and
// its error.
func (sh *Shell) RunAll(cmds []string, from int) (int, error) {
	for i := from; i < len(cmds); i++ {
		if _, err := sh.run(cmds[i]); err != nil {
			return i, fmt.Errorf("the guide's %q: %w", cmds[i], err)
		}
	}
	return len(cmds), nil
}

// run runs one command and returns its standard output.
func (sh *Shell) run(cmd string) (string, error) {
	if m := assignment.FindStringSubmatch(cmd); m != nil {
		out, err := sh.run(m[2])
		sh.Vars[m[1]] = strings.TrimSpace(out)
		return "", err
	}
	w := sh.words(cmd)
	if len(w) == 0 {
		return "", nil
	}
	if shellVar.MatchString(w[0]) {
		for _, a := range w {
			name, value, ok := strings.Cut(a, "=")
			if !ok || !shellVar.MatchString(a) {
				sh.T.Fatalf("guide: %q mixes assignments and a command", cmd)
			}
			if ans, ok := sh.Answers[name]; ok {
				value = ans // what the list said, for this test's release
			}
			sh.Vars[name] = value
		}
		return "", nil
	}
	// Redirection of the output to a file, and a pipe to one filter.
	var outFile string
	if n := len(w); n > 2 && w[n-2] == ">" {
		outFile, w = w[n-1], w[:n-2]
	}
	var filter []string
	for i, x := range w {
		if x == "|" {
			filter, w = w[i+1:], w[:i]
			break
		}
	}
	out, err := sh.exec(cmd, w)
	if err != nil {
		return "", err
	}
	if filter != nil {
		if out, err = sh.filter(cmd, filter, out); err != nil {
			return "", err
		}
	}
	if w[0] == "helm" && len(w) > 1 && w[1] == "list" && !sh.listed(out) {
		return "", fmt.Errorf("the release %s in %s is not in what it prints:\n%s", sh.Answers["RELEASE"], sh.Answers["NS"], out)
	}
	if outFile != "" && outFile != "/dev/null" {
		sh.Files[outFile] = []byte(out)
		return "", nil
	}
	return out, nil
}

// filter runs the grep or awk a command's output goes through.
func (sh *Shell) filter(cmd string, f []string, in string) (string, error) {
	switch {
	case len(f) == 2 && f[0] == "grep":
		var out strings.Builder
		for _, line := range strings.SplitAfter(in, "\n") {
			if strings.Contains(line, f[1]) {
				out.WriteString(line)
			}
		}
		if out.Len() == 0 {
			return "", fmt.Errorf("grep %s: no line matches", f[1])
		}
		return out.String(), nil
	case len(f) == 2 && f[0] == "awk":
		c := exec.Command("awk", f[1])
		c.Stdin = strings.NewReader(in)
		var stderr bytes.Buffer
		c.Stderr = &stderr
		out, err := c.Output()
		if err != nil {
			return "", fmt.Errorf("awk: %v: %s", err, stderr.String())
		}
		return string(out), nil
	}
	sh.T.Fatalf("guide: %q pipes into %q, which this test does not run", cmd, f)
	return "", nil
}

// opts takes -n/--namespace and the given flags (with values, or
// "" when they take none) out of w.
func opts(w []string, withValue ...string) (rest []string, ns string, set map[string]string) {
	set = map[string]string{}
	for i := 0; i < len(w); i++ {
		x := w[i]
		if (x == "-n" || x == "--namespace") && i+1 < len(w) {
			ns, i = w[i+1], i+1
			continue
		}
		if v, ok := strings.CutPrefix(x, "--namespace="); ok {
			ns = v
			continue
		}
		matched := false
		for _, f := range withValue {
			if x == f && i+1 < len(w) {
				set[f], i, matched = w[i+1], i+1, true
				break
			}
			if v, ok := strings.CutPrefix(x, f+"="); ok {
				set[f], matched = v, true
				break
			}
		}
		if !matched && strings.HasPrefix(x, "-") && !slicesContain(withValue, x) {
			set[x] = ""
			matched = true
		}
		if !matched {
			rest = append(rest, x)
		}
	}
	return rest, ns, set
}

func slicesContain(s []string, x string) bool {
	for _, e := range s {
		if e == x {
			return true
		}
	}
	return false
}

// exec runs one helm or kubectl command (w, without pipe or redirection).
func (sh *Shell) exec(cmd string, w []string) (string, error) {
	unknown := func() (string, error) {
		sh.T.Fatalf("guide: %q is not a command this test runs; teach test/guide what it does", cmd)
		return "", nil
	}
	switch w[0] {
	case "echo":
		return strings.Join(w[1:], " ") + "\n", nil
	case "helm":
		args, ns, set := opts(w[1:], "-o", "-f", "--dry-run")
		if len(args) == 0 {
			return unknown()
		}
		switch {
		case args[0] == "list" && len(args) == 1 && hasFlag(set, "-A"):
			return sh.helmList()
		case args[0] == "get" && len(args) == 3 && args[1] == "values" && set["-o"] == "yaml":
			vals, err := action.NewGetValues(HelmIn(sh.T, sh.Kubeconfig, ns)).Run(args[2])
			if err != nil {
				return "", err
			}
			b, err := yaml.Marshal(vals) // as helm's -o yaml prints them
			return string(b), err
		case args[0] == "upgrade" && len(args) == 3 && args[2] == "bin/deploy/chart" && set["-f"] != "":
			var vals map[string]any
			if err := yaml.Unmarshal(sh.Files[set["-f"]], &vals); err != nil {
				return "", fmt.Errorf("%s: %w", set["-f"], err)
			}
			u := action.NewUpgrade(HelmIn(sh.T, sh.Kubeconfig, ns))
			u.Namespace, u.WaitStrategy = ns, kube.HookOnlyStrategy
			if d, ok := set["--dry-run"]; ok {
				if d != "server" {
					return unknown()
				}
				u.DryRunStrategy = action.DryRunServer
			}
			_, err := u.RunWithContext(sh.Ctx, args[1], sh.Chart, vals)
			return "", err
		case args[0] == "history" && len(args) == 2:
			h, err := action.NewHistory(HelmIn(sh.T, sh.Kubeconfig, ns)).Run(args[1])
			var out strings.Builder
			for _, r := range h {
				rel := r.(*releasev1.Release)
				fmt.Fprintf(&out, "%d\t%s\t%s-%s\n", rel.Version, rel.Info.Status, rel.Chart.Metadata.Name, rel.Chart.Metadata.Version)
			}
			return out.String(), err
		case args[0] == "rollback" && len(args) == 3:
			v, err := strconv.Atoi(args[2])
			if err != nil {
				return unknown()
			}
			rb := action.NewRollback(HelmIn(sh.T, sh.Kubeconfig, ns))
			rb.Version, rb.WaitStrategy = v, kube.HookOnlyStrategy
			return "", rb.Run(args[1])
		}
	case "kubectl":
		args, ns, set := opts(w[1:], "-l", "-o", "--replicas")
		switch {
		case len(args) == 2 && args[0] == "get" && args[1] == "daemonset" && set["-l"] != "" && set["-o"] == "name":
			l, err := sh.Kube.AppsV1().DaemonSets(ns).List(sh.Ctx, metav1.ListOptions{LabelSelector: set["-l"]})
			if err != nil {
				return "", err
			}
			var out strings.Builder
			for _, d := range l.Items {
				fmt.Fprintf(&out, "daemonset.apps/%s\n", d.Name)
			}
			return out.String(), nil
		case len(args) == 2 && args[0] == "delete" && strings.HasPrefix(args[1], "daemonset.apps/"):
			return "", sh.Kube.AppsV1().DaemonSets(ns).Delete(sh.Ctx, strings.TrimPrefix(args[1], "daemonset.apps/"), metav1.DeleteOptions{})
		case len(args) == 2 && args[0] == "delete" && args[1] == "daemonset":
			return "", fmt.Errorf("error: resource(s) were provided, but no name was specified")
		case len(args) == 2 && args[0] == "scale" && args[1] == "deployment" && set["-l"] != "" && set["--replicas"] != "":
			n, err := strconv.Atoi(set["--replicas"])
			if err != nil {
				return unknown()
			}
			l, err := sh.Kube.AppsV1().Deployments(ns).List(sh.Ctx, metav1.ListOptions{LabelSelector: set["-l"]})
			if err != nil {
				return "", err
			}
			if len(l.Items) == 0 {
				return "", fmt.Errorf("no objects passed to scale")
			}
			for _, d := range l.Items {
				scale := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: d.Name, Namespace: ns}, Spec: autoscalingv1.ScaleSpec{Replicas: int32(n)}}
				if _, err := sh.Kube.AppsV1().Deployments(ns).UpdateScale(sh.Ctx, d.Name, scale, metav1.UpdateOptions{}); err != nil {
					return "", err
				}
			}
			return "", nil
		}
	}
	return unknown()
}

func hasFlag(set map[string]string, f string) bool {
	_, ok := set[f]
	return ok
}

// helmList is `helm list -A`: name, namespace, revision, status, chart.
func (sh *Shell) helmList() (string, error) {
	l := action.NewList(HelmIn(sh.T, sh.Kubeconfig, ""))
	l.AllNamespaces, l.StateMask = true, action.ListDeployed|action.ListFailed
	rels, err := l.Run()
	if err != nil {
		return "", err
	}
	out := "NAME\tNAMESPACE\tREVISION\tSTATUS\tCHART\n"
	for _, r := range rels {
		rel := r.(*releasev1.Release)
		out += fmt.Sprintf("%s\t%s\t%d\t%s\t%s-%s\n", rel.Name, rel.Namespace, rel.Version, rel.Info.Status, rel.Chart.Metadata.Name, rel.Chart.Metadata.Version)
	}
	return out, nil
}

// listed: the list shows the release the person then sets RELEASE and NS
// to.
func (sh *Shell) listed(out string) bool {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Split(line, "\t")
		if len(f) > 1 && f[0] == sh.Answers["RELEASE"] && f[1] == sh.Answers["NS"] {
			return true
		}
	}
	return false
}
