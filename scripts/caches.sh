# Sourced by scripts/env.sh (after ROOT is set): the caches that every checkout on this machine shares, outside
# any checkout, so that a fresh clone compiles and downloads only what no other checkout here already did.
#
# Compiler cache (ccache, where installed; CUSTOMOPS_CCACHE=0 turns it off): CMake takes the launchers from the
# environment when it configures a build tree for the first time, so every build the scripts and the tests make
# goes through it: the library (CMake or pip), the sanitized build, the tests' own builds. Paths under the
# checkout are hashed relative to it (base_dir), so a clone in another folder hits what this one compiled.
# CUSTOMOPS_CCACHE_DIR (default ~/.cache/customops/ccache) and CUSTOMOPS_CCACHE_MAXSIZE (default 8G; the least
# recently used entries go first) choose where and how much.
#
# Download cache: a folder of wheels, CUSTOMOPS_WHEELS (default ~/.cache/customops/wheels; empty: none). The
# scripts install from it, offline where it holds every wheel needed, else after `pip wheel` put the missing ones
# there, so that torch's wheels (about 4 GB each) are downloaded once per machine. pip's own cache
# keeps only what the index allows it to cache, which not every mirror does; env.sh goes without the folder where
# the disk has no room for it.
# (~ rather than $HOME: bash finds the home folder itself where HOME is not set.)
CUSTOMOPS_CACHE_HOME=${XDG_CACHE_HOME:-~/.cache}/customops
CUSTOMOPS_WHEELS="${CUSTOMOPS_WHEELS-$CUSTOMOPS_CACHE_HOME/wheels}"

# pip_install <python> <requirements...> (-r FILE, --no-deps, names): through the wheel folder where there is one.
pip_install() {
  local python="$1"
  shift
  if [[ -z "$CUSTOMOPS_WHEELS" ]]; then
    "$python" -m pip install -q --no-cache-dir "$@"
    return
  fi
  mkdir -p "$CUSTOMOPS_WHEELS"
  # From the folder alone first: where it holds a wheel for every requirement (the pins, and what they resolved to
  # when first downloaded), the index is not asked at all, and a warm machine's set-up does not fail when the index
  # drops a connection (pip wheel asks it about every pin, present or not). Else pip wheel fetches what is missing.
  if ! "$python" -m pip install -q --no-cache-dir --no-index --find-links "$CUSTOMOPS_WHEELS" "$@" 2>/dev/null; then
    "$python" -m pip wheel -q --no-cache-dir -w "$CUSTOMOPS_WHEELS" "$@"
    "$python" -m pip install -q --no-cache-dir --no-index --find-links "$CUSTOMOPS_WHEELS" "$@"
  fi
  # Bounded by use: wheels that no install has read for a month go.
  find "$CUSTOMOPS_WHEELS" -name '*.whl' -atime +30 -delete
}

if [[ "${CUSTOMOPS_CCACHE:-1}" != 0 ]] && command -v ccache >/dev/null; then
  export CCACHE_DIR="${CUSTOMOPS_CCACHE_DIR:-$CUSTOMOPS_CACHE_HOME/ccache}"
  export CCACHE_MAXSIZE="${CUSTOMOPS_CCACHE_MAXSIZE:-8G}"
  export CCACHE_BASEDIR="$ROOT"
  # The precompiled torch headers need pch_defines and time_macros (ccache cannot see through a .gch); the
  # header's mtime is the configure's, newer in each fresh tree. Debug builds (the sanitized one) would hash the
  # build folder's absolute path for their debug information: not hashed, a clone's objects name the first
  # clone's paths in their line tables, which only a debugger reads.
  export CCACHE_SLOPPINESS="pch_defines,time_macros,include_file_mtime,include_file_ctime"
  export CCACHE_NOHASHDIR=1
  # The compilers' contents, not their modification times: nvcc from PyPI is a new file in each environment.
  export CCACHE_COMPILERCHECK=content
  export CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_CUDA_COMPILER_LAUNCHER=ccache
else
  # A build tree configured with the launcher keeps it: ccache then runs the compiler itself.
  export CCACHE_DISABLE=1
  unset CMAKE_CXX_COMPILER_LAUNCHER CMAKE_CUDA_COMPILER_LAUNCHER
fi

# cached_build <what> <command...>: runs a build, then prints how many of its compilations the cache served.
cached_build() {
  local what="$1"
  shift
  if [[ -z "${CMAKE_CXX_COMPILER_LAUNCHER:-}" ]]; then
    "$@"
    return
  fi
  local log
  log="$(mktemp)"
  CCACHE_STATSLOG="$log" "$@" || { rm -f "$log"; return 1; }
  # ccache's stats log: a line with each compilation's result among its counters.
  awk -v what="$what" -v dir="$CCACHE_DIR" '/^(direct|preprocessed)_cache_hit$/ { hit++ } /^cache_miss$/ { miss++ }
    END { n = hit + miss; printf "customops: compiler cache for %s: %d of %d compilations hit%s, in %s\n", what, hit, n,
          n ? sprintf(" (%.0f%%)", 100 * hit / n) : "", dir }' "$log" >&2
  rm -f "$log"
}
