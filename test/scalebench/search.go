package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// completed reports whether a run did all a user needs at its size:
// every Service with its ingress and the module's objects applied, no OOM
// kill, and the one leader kept its lease throughout.
func completed(rep *report, err error) (bool, string) {
	switch {
	case err != nil:
		return false, err.Error()
	case rep == nil || rep.fill.name == "":
		return false, "the fill did not finish"
	case !rep.moduleApplied:
		return false, "the module's objects were never all applied"
	case rep.oomKills > 0:
		return false, fmt.Sprintf("%d OOM kills", rep.oomKills)
	case rep.lease.changes > 0:
		return false, "the leader lost its lease"
	}
	return true, "completed"
}

// search runs the bench at o.memoryLimit and, with a step, again at each
// limit one step smaller while the run before completed. The in-process
// module measurement runs with the first run only. It returns the reports
// and, with a step, a summary table (Markdown), and whether the first run
// completed.
func search(ctx context.Context, o options, step int64, logf func(string, ...any)) (string, string, bool) {
	var b, sum strings.Builder
	type tried struct {
		mib     int64
		ok      bool
		why     string
		anonMiB float64
		peakMiB float64
	}
	var runs []tried
	dir := o.dir
	for limit := o.memoryLimit; ; limit -= step {
		o.memoryLimit = limit
		if step > 0 && dir != "" {
			o.dir = filepath.Join(dir, fmt.Sprintf("limit-%dMi", limit>>20))
			if err := os.MkdirAll(o.dir, 0o755); err != nil {
				fmt.Fprintf(&b, "scalebench: %v\n", err)
				break
			}
		}
		if step > 0 {
			logf("run at a %d MiB limit", limit>>20)
		}
		rep, err := run(ctx, o, logf)
		if rep != nil {
			b.WriteString(rep.String())
		}
		ok, why := completed(rep, err)
		t := tried{mib: limit >> 20, ok: ok, why: why}
		if rep != nil {
			t.anonMiB, t.peakMiB = float64(rep.peakAnonKiB)/1024, float64(rep.cgroupPeak)/(1<<20)
		}
		runs = append(runs, t)
		o.skipModule = true
		if !ok {
			fmt.Fprintf(&b, "\nscalebench: at %d MiB: %s\n", limit>>20, why)
		}
		if step == 0 || !ok || limit-step <= 0 || ctx.Err() != nil {
			break
		}
	}
	if step > 0 {
		b := &sum
		fmt.Fprintf(b, "\n## Smallest memory limit (steps of %d MiB down from %d MiB)\n\n", step>>20, runs[0].mib)
		fmt.Fprintf(b, "| limit | outcome | peak anonymous memory | peak cgroup charge |\n| --- | --- | --- | --- |\n")
		smallest := int64(0)
		for _, r := range runs {
			charge := "-"
			if r.peakMiB > 0 {
				charge = fmt.Sprintf("%.1f MiB", r.peakMiB)
			}
			fmt.Fprintf(b, "| %d MiB | %s | %.1f MiB | %s |\n", r.mib, r.why, r.anonMiB, charge)
			if r.ok {
				smallest = r.mib
			}
		}
		if smallest > 0 {
			fmt.Fprintf(b, "\nSmallest limit that completed: %d MiB.\n", smallest)
		} else {
			fmt.Fprintf(b, "\nNo limit completed.\n")
		}
	}
	return b.String(), sum.String(), len(runs) > 0 && runs[0].ok
}

// writeReport writes out to path as Markdown, headed by what produced it.
func writeReport(path, out, summary string, began time.Time) error {
	commit, _ := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if dirty, _ := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); len(dirty) > 0 {
		commit = append(bytes.TrimSpace(commit), " with uncommitted changes"...)
	}
	mem := "memory unknown"
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kib int64
		if _, err := fmt.Sscanf(string(b), "MemTotal: %d kB", &kib); err == nil {
			mem = fmt.Sprintf("%.1f GiB of memory", float64(kib)/(1<<20))
		}
	}
	var b strings.Builder
	b.WriteString("# Scale bench report\n\n")
	b.WriteString("Written by `make bench-scale` (test/scalebench); run it again to replace this file.\n\n")
	fmt.Fprintf(&b, "- Command: `scalebench %s`\n", strings.Join(os.Args[1:], " "))
	fmt.Fprintf(&b, "- Commit: %s\n", strings.TrimSpace(string(commit)))
	fmt.Fprintf(&b, "- Ran: %s, for %s\n", began.UTC().Format(time.RFC3339), time.Since(began).Round(time.Second))
	fmt.Fprintf(&b, "- Machine: %d CPUs, %s\n\n", runtime.NumCPU(), mem)
	b.WriteString(strings.TrimPrefix(summary, "\n"))
	b.WriteString("\n```text")
	b.WriteString(out)
	b.WriteString("```\n")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
