#!/usr/bin/env bash
# Installs with apt-get what the build, the tests and the docs need from the system and do not find.
set -euo pipefail
missing=()
command -v cmake >/dev/null || missing+=(cmake)
command -v g++ >/dev/null || missing+=(g++)
[[ -e /usr/include/gtest/gtest.h ]] || missing+=(libgtest-dev)
command -v dot >/dev/null || missing+=(graphviz)      # the docs' architecture diagram
command -v chromium >/dev/null || missing+=(chromium)  # tests/python/test_docs.py opens the built site
if ((${#missing[@]})); then
  echo "customops: installing ${missing[*]} with apt-get" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# The compiler cache (scripts/caches.sh), where it can be had: the scripts build without it otherwise.
if [[ "${CUSTOMOPS_CCACHE:-1}" != 0 ]] && ! command -v ccache >/dev/null; then
  echo "customops: installing ccache with apt-get" >&2
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ccache; } >/dev/null 2>&1 ||
    echo "customops: ccache could not be installed; building without a compiler cache" >&2
fi
