package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/metal"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/plan"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/provider"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/redact"
)

// cloudConfigKey is the key of the cloud-config in its Secret.
const cloudConfigKey = "cloud-sa.json"

// subcommands are the binary's commands besides running the CCM.
var subcommands = map[string]func(ctx context.Context, args []string, stdout, stderr io.Writer) int{
	"plan":    runPlan,
	"cleanup": runCleanup,
}

const planUsage = `Usage: cloud-provider-equinix-metal plan [--kubeconfig FILE] [--cloud-config FILE | --cloud-config-secret NS/NAME] [-o text|json] [--metal-... flags]

Shows what a sync of the CCM would change, without changing anything: Elastic IPs to reserve, adopt
or release, placement that differs from existing Elastic IPs, orphaned Elastic IPs, BGP sessions, node
annotations, and load-balancer objects to create, update or prune. It reads the cluster and Equinix
Metal only. Settings are layered as for the CCM: flag > METAL_* environment > cloud-config > default.
Exit code: 0 nothing to change, 2 something to change, 1 error.

`

// runPlan is the plan subcommand; it returns the exit code.
func runPlan(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("plan", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, planUsage); fs.PrintDefaults() }
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the cluster (default: $KUBECONFIG, then ~/.kube/config)")
	cloudConfig := fs.String("cloud-config", "", "the CCM's cloud-config file (cloud-sa.json)")
	secret := fs.String("cloud-config-secret", "", "read the cloud-config from this Secret (namespace/name, key cloud-sa.json) instead of a file, e.g. kube-system/metal-cloud-config")
	output := fs.StringP("output", "o", "text", "output format: text or json")
	metalFlags := pflag.NewFlagSet(config.FlagSetName, pflag.ContinueOnError)
	config.AddFlags(metalFlags)
	fs.AddFlagSet(metalFlags)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		return fail(stderr, err)
	}
	if *output != "text" && *output != "json" {
		return fail(stderr, fmt.Errorf("-o %q is not an output format; use text or json", *output))
	}
	redact.Install(redact.Default, false)
	restConfig, err := kubeConfig(*kubeconfig)
	if err != nil {
		return fail(stderr, err)
	}
	b, path, err := cloudConfigBytes(ctx, restConfig, *cloudConfig, *secret)
	if err != nil {
		return fail(stderr, err)
	}
	cfg, err := config.Load(config.Sources{Flags: metalFlags, CloudConfig: b, CloudConfigPath: path})
	if err != nil {
		return fail(stderr, err)
	}
	redact.Default.Add(cfg.APIKey.Reveal(), cfg.BGPPass.Reveal())
	cloud, err := provider.NewForPlan(cfg)
	if err != nil {
		return fail(stderr, err)
	}
	res, err := cloud.Plan(ctx, restConfig)
	if err != nil {
		return fail(stderr, err)
	}
	write := plan.WriteText
	if *output == "json" {
		write = plan.WriteJSON
	}
	if err := write(stdout, res, redact.Default); err != nil {
		return fail(stderr, err)
	}
	return res.ExitCode()
}

// kubeConfig loads a kubeconfig as kubectl does.
func kubeConfig(path string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig: %w; pass --kubeconfig or set KUBECONFIG", err)
	}
	return cfg, nil
}

// cloudConfigBytes reads the cloud-config from a file or from its Secret
// (with the plan's read-only client); neither is fine too, as for the CCM.
func cloudConfigBytes(ctx context.Context, restConfig *rest.Config, file, secret string) ([]byte, string, error) {
	switch {
	case file != "" && secret != "":
		return nil, "", errors.New("--cloud-config and --cloud-config-secret both given; pass one")
	case secret == "":
		b, err := config.ReadCloudConfig(file)
		return b, file, err
	}
	ns, name, ok := strings.Cut(secret, "/")
	if !ok || ns == "" || name == "" {
		return nil, "", fmt.Errorf("--cloud-config-secret %q is not namespace/name; use for example kube-system/metal-cloud-config", secret)
	}
	kube, err := kubernetes.NewForConfig(plan.ReadOnlyKube(restConfig, provider.PlanUserAgent))
	if err != nil {
		return nil, "", err
	}
	s, err := kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, "", fmt.Errorf("reading the cloud-config Secret %s: %w", secret, err)
	}
	b, ok := s.Data[cloudConfigKey]
	if !ok {
		return nil, "", fmt.Errorf("the Secret %s has no key %s; it is the key the CCM's Deployment mounts", secret, cloudConfigKey)
	}
	return b, "Secret " + secret, nil
}

const cleanupUsage = `Usage: cloud-provider-equinix-metal cleanup --cluster-uid UID [--yes] [--cloud-config FILE] [--metal-... flags]

Releases every Service Elastic IP of one cluster after the cluster is gone: the reservations tagged
usage=cloud-provider-equinix-metal-auto and cluster=UID (UID is the cluster's kube-system namespace UID).
It lists them first and releases them only with --yes. The control-plane EIP, other clusters' and
untagged reservations are never touched.

`

// runCleanup is the cleanup subcommand; it returns the exit code.
func runCleanup(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("cleanup", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, cleanupUsage); fs.PrintDefaults() }
	uid := fs.String("cluster-uid", "", "UID of the gone cluster's kube-system namespace (required)")
	yes := fs.Bool("yes", false, "release what is listed (without it, nothing is released)")
	cloudConfig := fs.String("cloud-config", "", "the CCM's cloud-config file (cloud-sa.json)")
	metalFlags := pflag.NewFlagSet(config.FlagSetName, pflag.ContinueOnError)
	config.AddFlags(metalFlags)
	fs.AddFlagSet(metalFlags)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		return fail(stderr, err)
	}
	if *uid == "" {
		return fail(stderr, errors.New("--cluster-uid is required: the UID of the gone cluster's kube-system namespace (the cluster=<uid> tag of its Elastic IPs)"))
	}
	redact.Install(redact.Default, false)
	b, err := config.ReadCloudConfig(*cloudConfig)
	if err != nil {
		return fail(stderr, err)
	}
	cfg, err := config.Load(config.Sources{Flags: metalFlags, CloudConfig: b, CloudConfigPath: *cloudConfig})
	if err != nil {
		return fail(stderr, err)
	}
	opts := metal.OptionsFromConfig(cfg, provider.PlanUserAgent)
	opts.ReadOnly = !*yes // listing alone can never release anything
	mc, err := metal.New(opts)
	if err != nil {
		return fail(stderr, err)
	}
	if err := plan.Cleanup(ctx, mc, *uid, *yes, stdout); err != nil {
		return fail(stderr, err)
	}
	return 0
}

func fail(w io.Writer, err error) int {
	fmt.Fprintf(w, "error: %s\n", redact.Default.String(err.Error()))
	return plan.ExitError
}
