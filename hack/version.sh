#!/usr/bin/env bash
# Prints the version of the checked-out tree, the one the Makefile stamps
# into the binary, the image labels, the chart and the manifests:
#   on a tag:            v1.2.0
#   after a tag:         v1.2.0-3-gabc1234        (git describe)
#   no tag reachable:    v0.0.0-dev.gabc1234def0  (a dev version)
#   uncommitted changes: ...-dirty
# The result is both a SemVer 2 version (for Helm) and a valid OCI tag (no
# "+"), so one string serves everywhere.
set -eu
if ! git rev-parse --git-dir >/dev/null 2>&1; then
  echo v0.0.0-dev
  exit 0
fi
if v=$(git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null); then
  echo "$v"
  exit 0
fi
dirty=""
git diff --quiet HEAD -- 2>/dev/null || dirty="-dirty"
echo "v0.0.0-dev.g$(git rev-parse --short=12 HEAD)${dirty}"
