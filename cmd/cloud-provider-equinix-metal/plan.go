package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/term"
	"k8s.io/utils/ptr"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/metal"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/plan"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/provider"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/redact"
)

// cloudConfigKey is the key of the cloud-config in its Secret.
const cloudConfigKey = "cloud-sa.json"

const planLong = `Shows what a sync of the CCM would change, without changing anything: Elastic IPs to reserve, adopt
or release, placement that differs from existing Elastic IPs, orphaned Elastic IPs, BGP sessions, node
annotations, and load-balancer objects to create, update or prune. It reads the cluster and Equinix
Metal only. Settings are layered as for the CCM: flag > METAL_* environment > cloud-config > default.
Exit code: 0 nothing to change, 2 something to change, 1 error.`

// planOptions are plan's flags.
type planOptions struct {
	// kube holds --kubeconfig and --context only: plan reads every
	// namespace, so --namespace would do nothing, and the cluster's other
	// settings (server, credentials) come from the kubeconfig.
	kube        *genericclioptions.ConfigFlags
	cloudConfig string
	secret      string
	output      string
	metal       *pflag.FlagSet
}

// newPlanCommand is the plan subcommand, and the options its flags fill; it
// sets *exit to plan's exit code.
func newPlanCommand(exit *int) (*cobra.Command, *planOptions) {
	o := &planOptions{kube: &genericclioptions.ConfigFlags{KubeConfig: ptr.To(""), Context: ptr.To("")}}
	var fss cliflag.NamedFlagSets
	own := fss.FlagSet("plan")
	own.StringVar(&o.cloudConfig, "cloud-config", "", "the CCM's cloud-config file (cloud-sa.json)")
	own.StringVar(&o.secret, "cloud-config-secret", "", "read the cloud-config from this Secret (namespace/name, key cloud-sa.json) instead of a file, e.g. kube-system/metal-cloud-config")
	own.StringVarP(&o.output, "output", "o", "text", "output format: text or json")
	own.BoolP("help", "h", false, "help for plan")
	kube := fss.FlagSet("kubeconfig")
	o.kube.AddFlags(kube)
	// kubectl's texts, with where the default comes from.
	kube.Lookup("kubeconfig").Usage = "kubeconfig of the cluster (default: $KUBECONFIG, then ~/.kube/config)"
	kube.Lookup("context").Usage = "context of the kubeconfig to use (default: its current-context)"
	o.metal = fss.FlagSet(config.FlagSetName)
	config.AddFlags(o.metal)

	cmd := newSubcommand("plan [--kubeconfig FILE] [--context NAME] [--cloud-config FILE | --cloud-config-secret NS/NAME] [-o text|json] [--metal-... flags]",
		"Show what a sync of the CCM would change, changing nothing", planLong, exit,
		func(c *cobra.Command) int { return o.run(c.Context(), c.OutOrStdout(), c.ErrOrStderr()) })
	subcommandFlags(cmd, fss, exit)
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"text", "json"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("context", func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		// The contexts of the kubeconfig that --kubeconfig, if already
		// given, or KUBECONFIG and ~/.kube/config name.
		raw, err := kubeLoader(o.kube).RawConfig()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return slices.Sorted(maps.Keys(raw.Contexts)), cobra.ShellCompDirectiveNoFileComp
	})
	return cmd, o
}

// run is plan once its flags are parsed; it returns the exit code.
func (o *planOptions) run(ctx context.Context, stdout, stderr io.Writer) int {
	if o.output != "text" && o.output != "json" {
		return fail(stderr, fmt.Errorf("-o %q is not an output format; use text or json", o.output))
	}
	redact.Install(redact.Default, false)
	restConfig, err := kubeConfig(o.kube)
	if err != nil {
		return fail(stderr, err)
	}
	b, path, err := cloudConfigBytes(ctx, restConfig, o.cloudConfig, o.secret)
	if err != nil {
		return fail(stderr, err)
	}
	cfg, err := config.Load(config.Sources{Flags: o.metal, CloudConfig: b, CloudConfigPath: path})
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
	if o.output == "json" {
		write = plan.WriteJSON
	}
	if err := write(stdout, res, redact.Default); err != nil {
		return fail(stderr, err)
	}
	return res.ExitCode()
}

// kubeConfig loads the kubeconfig as kubectl does, with --kubeconfig and
// --context applied.
func kubeConfig(kube *genericclioptions.ConfigFlags) (*rest.Config, error) {
	loader := kubeLoader(kube)
	cfg, err := loader.ClientConfig()
	if err == nil {
		return cfg, nil
	}
	// A context that is not there is a typo more often than a missing
	// file: name the ones there are.
	if raw, rawErr := loader.RawConfig(); rawErr == nil && *kube.Context != "" && raw.Contexts[*kube.Context] == nil && len(raw.Contexts) > 0 {
		names := slices.Sorted(maps.Keys(raw.Contexts))
		return nil, fmt.Errorf("loading the kubeconfig: no context %q in it; pass --context with one of %s", *kube.Context, strings.Join(names, ", "))
	}
	return nil, fmt.Errorf("loading the kubeconfig: %w; pass --kubeconfig or set KUBECONFIG", err)
}

// kubeLoader binds the flags of kube to kubectl's loading rules itself
// rather than calling kube.ToRawKubeConfigLoader, which falls back to
// http://localhost:8080 when nothing is configured (kubectl's legacy
// default): plan would then fail on a refused connection instead of saying
// what to pass.
func kubeLoader(kube *genericclioptions.ConfigFlags) clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = *kube.KubeConfig
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: *kube.Context})
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

const cleanupLong = `Releases every Service Elastic IP of one cluster after the cluster is gone: the reservations tagged
usage=cloud-provider-equinix-metal-auto and cluster=UID (UID is the cluster's kube-system namespace UID).
It lists them first and releases them only with --yes. The control-plane EIP, other clusters' and
untagged reservations are never touched.`

// newCleanupCommand is the cleanup subcommand; it sets *exit to its exit
// code. It has no kubeconfig flags: the cluster is gone, and cleanup talks
// to Equinix Metal only.
func newCleanupCommand(exit *int) *cobra.Command {
	var fss cliflag.NamedFlagSets
	own := fss.FlagSet("cleanup")
	uid := own.String("cluster-uid", "", "UID of the gone cluster's kube-system namespace (required)")
	yes := own.Bool("yes", false, "release what is listed (without it, nothing is released)")
	cloudConfig := own.String("cloud-config", "", "the CCM's cloud-config file (cloud-sa.json)")
	own.BoolP("help", "h", false, "help for cleanup")
	metalFlags := fss.FlagSet(config.FlagSetName)
	config.AddFlags(metalFlags)

	cmd := newSubcommand("cleanup --cluster-uid UID [--yes] [--cloud-config FILE] [--metal-... flags]",
		"Release the Service Elastic IPs of a cluster that is gone", cleanupLong, exit,
		func(c *cobra.Command) int {
			return runCleanup(c.Context(), *uid, *yes, *cloudConfig, metalFlags, c.OutOrStdout(), c.ErrOrStderr())
		})
	subcommandFlags(cmd, fss, exit)
	return cmd
}

// newSubcommand is a subcommand that takes no positional arguments (its
// settings are all flags, so a stray word is a mistake to report, not to
// ignore) and sets *exit to what run returns.
func newSubcommand(use, short, long string, exit *int, run func(*cobra.Command) int) *cobra.Command {
	return &cobra.Command{
		Use:                   use,
		Short:                 short,
		Long:                  long,
		DisableFlagsInUseLine: true,
		ValidArgsFunction:     cobra.NoFileCompletions,
		Run: func(c *cobra.Command, args []string) {
			if len(args) > 0 {
				*exit = fail(c.ErrOrStderr(), fmt.Errorf("%s takes no arguments, got %q; settings are flags, see --help", c.Name(), args))
				return
			}
			*exit = run(c)
		},
	}
}

// runCleanup is cleanup once its flags are parsed; it returns the exit code.
func runCleanup(ctx context.Context, uid string, yes bool, cloudConfig string, metalFlags *pflag.FlagSet, stdout, stderr io.Writer) int {
	if uid == "" {
		return fail(stderr, errors.New("--cluster-uid is required: the UID of the gone cluster's kube-system namespace (the cluster=<uid> tag of its Elastic IPs)"))
	}
	redact.Install(redact.Default, false)
	b, err := config.ReadCloudConfig(cloudConfig)
	if err != nil {
		return fail(stderr, err)
	}
	cfg, err := config.Load(config.Sources{Flags: metalFlags, CloudConfig: b, CloudConfigPath: cloudConfig})
	if err != nil {
		return fail(stderr, err)
	}
	opts := metal.OptionsFromConfig(cfg, provider.PlanUserAgent)
	opts.ReadOnly = !yes // listing alone can never release anything
	mc, err := metal.New(opts)
	if err != nil {
		return fail(stderr, err)
	}
	if err := plan.Cleanup(ctx, mc, uid, yes, stdout); err != nil {
		return fail(stderr, err)
	}
	return 0
}

// subcommandFlags gives a subcommand its flags, by section, and the help,
// usage and flag errors of this binary's commands.
func subcommandFlags(cmd *cobra.Command, fss cliflag.NamedFlagSets, exit *int) {
	for _, name := range fss.Order {
		cmd.Flags().AddFlagSet(fss.FlagSets[name])
	}
	// Printed as the standard command prints its own help, by section,
	// with the logging flags the root passes down last.
	show := func(c *cobra.Command, w io.Writer) {
		cols, _, _ := term.TerminalSize(w)
		fmt.Fprintf(w, "%s\n\nUsage:\n  %s\n", c.Long, c.UseLine())
		sections := fss
		if inherited := c.InheritedFlags(); inherited.HasAvailableFlags() {
			sections.Order = slices.Clone(fss.Order)
			sections.FlagSets = maps.Clone(fss.FlagSets)
			sections.FlagSet("global").AddFlagSet(inherited)
		}
		cliflag.PrintSections(w, sections, cols)
	}
	cmd.SetHelpFunc(func(c *cobra.Command, _ []string) { show(c, c.OutOrStdout()) })
	cmd.SetUsageFunc(func(c *cobra.Command) error { show(c, c.OutOrStderr()); return nil })
	// A subcommand reports its errors itself, as one line (a --metal-*
	// value worded as any other configuration error), and sets its exit
	// code; returning nil makes cobra stop there and cli.Run print nothing.
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		if cfgErr := config.FlagError(err); cfgErr != nil {
			err = cfgErr
		}
		*exit = fail(c.ErrOrStderr(), err)
		return nil
	})
}

func fail(w io.Writer, err error) int {
	fmt.Fprintf(w, "error: %s\n", redact.Default.String(err.Error()))
	return plan.ExitError
}
