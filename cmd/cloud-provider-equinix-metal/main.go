// Command cloud-provider-equinix-metal is the Kubernetes cloud controller
// manager for Equinix Metal: the standard cloud-controller-manager command
// with the equinixmetal provider and this CCM's own flags.
package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/wait"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	appconfig "k8s.io/cloud-provider/app/config"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"
	"k8s.io/component-base/cli"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register"          // --logging-format=json
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric
	"k8s.io/component-base/version"
	"k8s.io/component-base/version/verflag"
	"k8s.io/klog/v2"
	// The image has no base and so no CA bundle: without a system pool,
	// crypto/x509 uses these public roots to verify the Equinix Metal API
	// (and a module registry). A mounted bundle (SSL_CERT_FILE) still wins.
	_ "golang.org/x/crypto/x509roots/fallback"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/memlimit"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/provider"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/readiness"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/redact"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// run executes one command line and returns the exit code: the standard
// command runs the CCM, its subcommands are plan, cleanup and cobra's help
// and completion. The tests run plan and cleanup through it, as the binary
// does.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd, err := newCCMCommand()
	if err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return 1
	}
	// plan's exit code says whether something would change, and cobra
	// knows only success or an error: a subcommand sets it here and
	// reports its own errors.
	exit := 0
	planCmd, _ := newPlanCommand(&exit)
	cmd.AddCommand(planCmd, newCleanupCommand(&exit), newCheckPoliciesCommand(&exit))

	// The standard command's help and usage print the CCM's flag sections,
	// and cobra gives a command without its own its parent's: they stay
	// the root's, and every other command without its own (help,
	// completion) gets cobra's.
	ccmHelp, ccmUsage := cmd.HelpFunc(), cmd.UsageFunc()
	var plain cobra.Command
	cobraHelp, cobraUsage := plain.HelpFunc(), plain.UsageFunc()
	cmd.SetHelpFunc(func(c *cobra.Command, args []string) {
		if c == cmd {
			ccmHelp(c, args)
			return
		}
		cobraHelp(c, args)
	})
	cmd.SetUsageFunc(func(c *cobra.Command) error {
		if c == cmd {
			return ccmUsage(c)
		}
		return cobraUsage(c)
	})

	// A --metal-* value that does not parse is a configuration error like
	// any other: one line naming the option, no usage. Any other flag
	// error is shown as cli.Run shows it, the usage and then the error;
	// SilenceUsage tells cli.Run that this command handles flag errors.
	cmd.SilenceUsage = true
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		if cfgErr := config.FlagError(err); cfgErr != nil {
			return exitError(cfgErr)
		}
		c.SilenceUsage = false
		return err
	})

	// cli.Run gives the root klog's -v, --vmodule and --log-flush-frequency
	// as persistent flags. The root shadows them with its own logging
	// flags; plan and cleanup inherit them, where -v and --vmodule set what
	// they log. klog writes their stderr unbuffered, so a flush period
	// changes nothing there: it is not offered (cli.Run's AddFlags finds
	// the flags already added).
	logs.AddFlags(cmd.PersistentFlags())
	if err := cmd.PersistentFlags().MarkHidden(logsapi.LogFlushFreqFlagName); err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return 1
	}
	// verflag's --version is on pflag.CommandLine, which cobra adds to the
	// root's persistent flags: every subcommand accepts it, so it answers
	// there as it does on the root (whose RunE answers it itself).
	cmd.PersistentPreRun = func(c *cobra.Command, _ []string) {
		if c != cmd {
			printVersionIfRequested(c)
			verflag.PrintAndExitIfRequested()
		}
	}

	cmd.SetArgs(args) // never nil: cobra would read os.Args, the test binary's in tests
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	cmd.SetContext(ctx)
	if code := cli.Run(cmd); code != 0 {
		return code
	}
	return exit
}

// newCCMCommand is k8s.io/cloud-provider's command with the equinixmetal
// provider and our flags: without a subcommand, it runs the CCM.
func newCCMCommand() (*cobra.Command, error) {
	opts, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		return nil, err
	}
	// One provider lives in this binary, so --cloud-provider need not be given.
	opts.KubeCloudShared.CloudProvider.Name = provider.ProviderName
	opts.ServiceController.ConcurrentServiceSyncs = provider.DefaultConcurrentServiceSyncs
	opts.Generic.ClientConnection.QPS = provider.DefaultKubeAPIQPS
	opts.Generic.ClientConnection.Burst = provider.DefaultKubeAPIBurst

	fss := cliflag.NamedFlagSets{}
	metalFlags := fss.FlagSet(config.FlagSetName)
	config.AddFlags(metalFlags)

	var cfg *config.Config
	hand := &handOver{}
	initCloud := func(completed *appconfig.CompletedConfig) cloudprovider.Interface {
		// Logging is configured now and no controller runs yet: from here
		// on no log line shows a secret, client-go's body dumps included.
		redact.Install(redact.Default, utilfeature.DefaultFeatureGate.Enabled(logsapi.ContextualLogging))
		cloud, err := provider.New(cfg)
		if err != nil {
			klog.Fatalf("Equinix Metal provider: %v", err)
		}
		hand.start(completed)
		go exitIfModuleFails(cloud.ModuleLoaded)
		startEveryReplica(cloud, cfg, opts.KubeCloudShared.CloudProvider.CloudConfigFile, metalFlags)
		return cloud
	}
	cmd := app.NewCloudControllerManagerCommand(opts, initCloud, hand.wrap(initFuncConstructors()),
		names.CCMControllerAliases(), fss, wait.NeverStop)
	cmd.Use = "cloud-provider-equinix-metal"
	cmd.Long += "\n\nOther commands: `cloud-provider-equinix-metal plan` (what a sync would change, changing nothing) and `cloud-provider-equinix-metal cleanup` (release a gone cluster's Elastic IPs); `cloud-provider-equinix-metal help plan` shows a command's flags, and `cloud-provider-equinix-metal completion bash` (or zsh, fish, powershell) prints a shell completion script."

	// Load and validate our configuration before the standard command builds
	// clients and servers, so a bad setting fails fast with one message
	// naming every problem, instead of a stack trace after leader election.
	standard := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		printVersionIfRequested(c)
		verflag.PrintAndExitIfRequested()
		if name := opts.KubeCloudShared.CloudProvider.Name; name != provider.ProviderName {
			return exitError(fmt.Errorf("--cloud-provider is %q, but this binary provides only %q; drop the flag or set it to %s", name, provider.ProviderName, provider.ProviderName))
		}
		path := opts.KubeCloudShared.CloudProvider.CloudConfigFile
		b, err := config.ReadCloudConfig(path)
		if err != nil {
			return exitError(err)
		}
		cfg, err = config.Load(config.Sources{Flags: metalFlags, CloudConfig: b, CloudConfigPath: path})
		if err != nil {
			return exitError(err)
		}
		redact.Default.Add(cfg.APIKey.Reveal(), cfg.BGPPass.Reveal())
		for _, w := range cfg.Warnings {
			klog.Warning(w)
		}
		klog.V(1).InfoS("Equinix Metal configuration", "config", cfg, "loadbalancer", cfg.LB.String())
		var moduleMemory int64 // a load-balancer module's memory is outside the Go heap
		if cfg.LB.Kind != config.LBNone {
			moduleMemory = int64(cfg.ModuleMemoryLimitMiB) << 20
		}
		goLimit, warning := memlimit.Set(moduleMemory)
		klog.InfoS("Starting cloud-provider-equinix-metal", "version", version.Get().GitVersion, "revision", version.Get().GitCommit,
			"goMemoryLimit", goLimit)
		if warning != "" {
			klog.Warning(warning)
		}
		return standard(c, args)
	}
	return cmd, nil
}

// exitIfModuleFails stops the CCM when the load-balancer module, compiled
// while the controllers start, cannot load: a mistake in the configuration,
// as a bad path is (that one stops it before anything starts).
// startEveryReplica starts what every replica runs, leader or not: the
// readiness endpoint, and the watch of the cloud-config file so that a
// rotated key in its Secret is used without a restart.
func startEveryReplica(cloud *provider.Cloud, cfg *config.Config, cloudConfig string, metalFlags *pflag.FlagSet) {
	if cfg.ReadinessAddress != "" {
		if err := readiness.Serve(context.Background(), cfg.ReadinessAddress, cloud.Readiness); err != nil {
			klog.Fatalf("%v", err)
		}
	}
	if cloudConfig != "" {
		go cloud.WatchCredentials(context.Background(), cloudConfig, func(b []byte) (*config.Config, error) {
			return config.Load(config.Sources{Flags: metalFlags, CloudConfig: b, CloudConfigPath: cloudConfig})
		})
	}
}

func exitIfModuleFails(loaded func(context.Context) error) {
	if err := loaded(context.Background()); err != nil {
		klog.ErrorS(err, "Equinix Metal provider: the load-balancer module did not load; fix it and restart")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
}

// printVersionIfRequested answers a plain --version with this binary's name
// and version (stamped by the Makefile into k8s.io/component-base/version);
// verflag would call it "Kubernetes". --version=raw stays verflag's.
func printVersionIfRequested(c *cobra.Command) {
	if f := c.Flags().Lookup("version"); f != nil && f.Value.String() == "true" {
		v := version.Get()
		fmt.Printf("cloud-provider-equinix-metal %s (revision %s, %s)\n", v.GitVersion, v.GitCommit, v.Platform)
		os.Exit(0)
	}
}

// exitError prints a configuration error plainly (no log decoration, no
// usage text) and exits, because the message is meant for a person.
func exitError(err error) error {
	fmt.Fprintf(os.Stderr, "error: %v\n", err)
	os.Exit(1)
	return err
}
