#!/bin/sh
# Removes what a killed test/cluster run left behind (make cluster-clean):
# its processes, network namespaces and host veth, mounts under its work
# directories, and cgroups. Every cluster's names start with "kc" and its
# work directory is /tmp/cluster-*. Root only; never needed after a normal
# Stop.
set -u
for ns in $(ip netns list | awk '{print $1}' | grep '^kc'); do
  ip netns pids "$ns" | xargs -r kill -9
done
for d in /tmp/cluster-*/; do
  [ -d "$d" ] || continue
  for pid in $(grep -lF "$d" /proc/[0-9]*/cmdline 2>/dev/null | cut -d/ -f3); do
    [ "$pid" = "$$" ] || kill -9 "$pid" 2>/dev/null
  done
done
sleep 1
for cg in /sys/fs/cgroup/*/kc*; do
  [ -d "$cg" ] || continue
  find "$cg" -name cgroup.procs -exec cat {} + 2>/dev/null | xargs -r kill -9
done
sleep 1
ip -br link | awk '{print $1}' | cut -d@ -f1 | grep '^kc' | xargs -r -n1 ip link del
for ns in $(ip netns list | awk '{print $1}' | grep '^kc'); do ip netns del "$ns"; done
awk '{print $5}' /proc/self/mountinfo | grep '^/tmp/cluster-' | sort -r | xargs -r -n1 umount -l
for cg in /sys/fs/cgroup/*/kc*; do
  [ -d "$cg" ] && find "$cg" -depth -type d -exec rmdir {} \; 2>/dev/null
done
echo "cluster-clean: done; work directories kept for their logs: $(ls -d /tmp/cluster-*/ 2>/dev/null | tr '\n' ' ')"
