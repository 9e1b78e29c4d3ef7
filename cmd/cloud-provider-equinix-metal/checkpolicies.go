package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	cliflag "k8s.io/component-base/cli/flag"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/policy"
)

const checkPoliciesLong = `Checks a policy directory as the CCM loads it from --metal-policy-dir, without a cluster or an
Equinix Metal project: every .rego, .json and .yaml file (not _test.rego) is read and compiled with
the builtins the CCM allows, and the rules the CCM queries must be there. What it refuses there, the
CCM refuses at start or on reload (keeping the policies it had). Then it asks each decision on a few
sample inputs (a Service with the metro configured, one with the metro annotation, an IPv6 address;
the BGP selection of three nodes in two metros) and checks each answer against the contract
(policies/README.md): an undefined decision, a value of the wrong type or an evaluation error fails
the check, as it would fail every such Service in the CCM; a denial does not. It does not run your
_test.rego files: opa test does. Exit code: 0 the policies load and answer the samples, 1 not.`

// newCheckPoliciesCommand is a linter for policy authors that needs
// nothing but the files: plan knows the same contract but wants a cluster
// and a project before it gets past the policies.
func newCheckPoliciesCommand(exit *int) *cobra.Command {
	var fss cliflag.NamedFlagSets
	own := fss.FlagSet("check-policies")
	dir := own.String("metal-policy-dir", "", "the policy directory to check, as the CCM's --metal-policy-dir (required)")
	own.BoolP("help", "h", false, "help for check-policies")
	cmd := newSubcommand("check-policies --metal-policy-dir DIR",
		"Check a policy directory as the CCM would load it, offline", checkPoliciesLong, exit,
		func(c *cobra.Command) int {
			return runCheckPolicies(c.Context(), *dir, c.OutOrStdout(), c.ErrOrStderr())
		})
	subcommandFlags(cmd, fss, exit)
	return cmd
}

func runCheckPolicies(ctx context.Context, dir string, stdout, stderr io.Writer) int {
	if dir == "" {
		return fail(stderr, errors.New("--metal-policy-dir is required: the directory of .rego files to check (the built-in policies are in the repository's policies/)"))
	}
	e, err := policy.Load(ctx, dir, policy.Options{})
	if err != nil {
		return fail(stderr, err)
	}
	if problems := sampleProblems(ctx, e); len(problems) > 0 {
		fmt.Fprintf(stderr, "error: policies %s load, but their decisions break the contract (policies/README.md) on sample inputs; the CCM would fail such Services:\n", e.Source())
		for _, p := range problems {
			fmt.Fprintf(stderr, "  - %s\n", p)
		}
		return 1
	}
	fmt.Fprintf(stdout, "policies %s: the CCM would load them (digest %s), and their decisions on the sample inputs keep the contract\n", e.Source(), e.Digest())
	return 0
}
