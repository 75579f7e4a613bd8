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
