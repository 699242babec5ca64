#!/usr/bin/env bash
# Builds the tests and the command line with AddressSanitizer + UndefinedBehaviorSanitizer (the `asan`
# preset: GCC, -fsanitize=address,undefined, any UB fatal, -O0, into build/asan) and runs the whole ctest
# suite under them, validation layer on as always; the targeted catalog suites run their quick subsets
# there (VKATTN_TESTS_QUICK_CATALOG, tests/CMakeLists.txt). Arguments go to ctest (e.g. -R unit, -j2;
# CI: -j2 -LE release-only, the tests tests/CMakeLists.txt leaves to the release run).
#
# -O0: vkattn's own code is a few percent of a sanitized test's time (perf, 2026-11-27: the rest is
# lavapipe building pipelines, uninstrumented), and GCC compiles it at -O0 in about 60% of -O1's time.
#
# lavapipe must stay loaded until the process exits: unloaded at vkDestroyInstance, it makes
# LeakSanitizer report a false 128-byte leak whose stack it can no longer symbolise (docs/devices.md).
# So its driver is preloaded (found through its ICD manifest), and ASan is told not to insist on
# being first in the library order (ASAN_OPTIONS=verify_asan_link_order=0, in the test preset with
# the other options; scripts/lsan.supp names the third-party leaks that are suppressed).
set -euo pipefail
cd "$(dirname "$0")/.."

# The library_path of the first of these Vulkan manifests that names an existing library (a bare file
# name is looked up like any library).
manifest_library() {
  local json path
  for json in "$@"; do
    [ -f "$json" ] || continue
    path=$(sed -n 's/.*"library_path"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p' "$json" | head -n 1)
    if [ -n "$path" ] && { [[ "$path" != */* ]] || [ -f "$path" ]; }; then echo "$path"; return; fi
  done
}
share=(/usr/share/vulkan /etc/vulkan /usr/local/share/vulkan)
icds=()
for d in "${share[@]}"; do icds+=("$d/icd.d/lvp_icd.$(uname -m).json"); done  # this architecture's first
for d in "${share[@]}"; do icds+=("$d"/icd.d/lvp_icd*.json); done
lvp=$(manifest_library "${icds[@]}")
if [ -z "$lvp" ]; then
  echo "asan-tests: lavapipe's ICD manifest (lvp_icd*.json) not found; install mesa-vulkan-drivers" >&2
  exit 1
fi
# (The validation layer must not be preloaded: its exported vkGetDeviceProcAddr would be interposed
# on the loader's. tests/main.cpp keeps it loaded under ASan with dlopen(RTLD_LOCAL | RTLD_NODELETE)
# instead, so its leaks carry its name for scripts/lsan.supp.)
preload="$lvp"
echo "asan-tests: keeping loaded (LD_PRELOAD): $preload"

cmake --preset asan
# What the tests run: the test binary and the command line (the cli_* tests); not the examples or
# the benchmark tools, which no test runs.
cmake --build --preset asan -j"$(nproc)" --target vkattn_tests vkattn_cli
LD_PRELOAD="$preload${LD_PRELOAD:+:$LD_PRELOAD}" ctest --preset asan "$@"
