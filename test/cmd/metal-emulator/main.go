// Command metal-emulator serves an in-memory Equinix Metal API (package
// test/emulator) for the sandbox, manual tests and benchmarks.
//
//	metal-emulator -addr 127.0.0.1:8080 -seed seed.yaml -v
//
// The API is at http://<addr>/metal/v1 (point the CCM's --metal-base-url
// there), the admin endpoints (counters, faults, state) at
// http://<addr>/_emulator/. Without -seed it serves emulator.DefaultSeed:
// one project, four metros, the token "emulator-token".
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("metal-emulator", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on (host:port; port 0 picks a free one)")
	seedPath := fs.String("seed", "", "seed file, JSON or YAML (.yaml/.yml); default: one project, four metros, token "+emulator.DefaultToken)
	verbose := fs.Bool("v", false, "log every request (method, path, route, status, duration) to stderr")
	pendingFor := fs.Duration("pending-for", 0, "keep reservations requested through the API pending this long before they turn created")
	devices := fs.Int("devices", 0, "add this many devices (node-0, node-1, ...) to the first project, in its first metro")
	randSeed := fs.Uint64("rand-seed", 0, "seed of generated IDs and fault draws (0: random)")
	printSeed := fs.Bool("print-default-seed", false, "print the default seed as JSON (a template for -seed) and exit")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: metal-emulator [flags]\n\nServes an in-memory Equinix Metal API at http://<addr>%s and its admin endpoints at http://<addr>%s/.\n\nFlags:\n", emulator.BasePath, emulator.AdminPath)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "metal-emulator: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if *printSeed {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(emulator.DefaultSeed())
		return 0
	}

	seed := emulator.DefaultSeed()
	if *seedPath != "" {
		var err error
		if seed, err = emulator.LoadSeed(*seedPath); err != nil {
			fmt.Fprintf(stderr, "metal-emulator: %v\n", err)
			return 1
		}
	}
	opts := emulator.Options{ReservationPendingFor: *pendingFor, RandSeed: *randSeed}
	if *verbose {
		opts.Logger = slog.New(slog.NewTextHandler(stderr, nil))
	}
	e, err := emulator.New(seed, opts)
	if err != nil {
		fmt.Fprintf(stderr, "metal-emulator: %v\n", err)
		return 1
	}
	projects := e.Projects()
	if *devices > 0 {
		if len(projects) == 0 {
			fmt.Fprintln(stderr, "metal-emulator: -devices needs a project in the seed")
			return 1
		}
		if _, err := e.AddDevices(*devices, emulator.DeviceSeed{Project: projects[0].ID, Hostname: "node-%d"}); err != nil {
			fmt.Fprintf(stderr, "metal-emulator: -devices: %v\n", err)
			return 1
		}
	}
	url, err := e.Listen(*addr)
	if err != nil {
		fmt.Fprintf(stderr, "metal-emulator: %v\n", err)
		return 1
	}
	defer e.Close()

	fmt.Fprintf(stderr, "metal-emulator: serving the Equinix Metal API at %s\n", url)
	fmt.Fprintf(stderr, "metal-emulator: admin endpoints at %s%s/ (counters, faults, state)\n", strings.TrimSuffix(url, emulator.BasePath), emulator.AdminPath)
	for _, p := range projects {
		fmt.Fprintf(stderr, "metal-emulator: project %s (%s): %d devices\n", p.ID, p.Name, len(e.Devices(p.ID)))
	}
	if *seedPath == "" {
		fmt.Fprintf(stderr, "metal-emulator: token %s\n", emulator.DefaultToken)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	fmt.Fprintf(stderr, "metal-emulator: stopping after %d requests\n", e.TotalRequests())
	return 0
}
