#!/usr/bin/env bash
# Regenerates go.mod for a new Kubernetes version: the staging modules that
# k8s.io/kubernetes replaces with local paths are pinned to the matching
# v0.MINOR.PATCH, so nothing but the version is chosen by hand.
#   ./gen-gomod.sh v1.37.1 > go.mod.new && mv go.mod.new go.mod
#   go get k8s.io/kubernetes/cmd/kube-apiserver@v1.37.1 go.etcd.io/etcd/server/v3@<etcd of that release>
# Do not run `go mod tidy` here: it pulls in the test dependencies of all of Kubernetes.
set -euo pipefail
V=${1:?usage: $0 v1.MINOR.PATCH}
SV="v0.${V#v1.}"
# Outside any module: the caller's redirect has already truncated go.mod.
MODFILE=$(cd / && GOWORK=off go mod download -json "k8s.io/kubernetes@${V}" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
echo "module github.com/metal-ccm/cloud-provider-equinix-metal/test/testenv/k8sbins"; echo
grep -E '^(go|godebug) ' "$MODFILE"
echo; echo "require k8s.io/kubernetes ${V}"; echo
echo "replace ("
sed -n 's#^[[:space:]]*\(k8s\.io/[^[:space:]]*\)[[:space:]]*=>[[:space:]]*\./staging/src/.*$#\t\1 => \1 '"${SV}"'#p' "$MODFILE"
echo ")"
