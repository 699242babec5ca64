#!/usr/bin/env bash
# Consumption tests: the three ways an application takes vkattn in, each built from scratch and run.
#   1. the installed package through find_package(vkattn)  (examples/: readme_example, minimal, decode_loop, context_parallel, mla_decode, app_record)
#   2. the source tree through add_subdirectory()           (tests/consume/add_subdirectory/)
#   3. the installed pkg-config file                        (a plain c++ compile of examples/minimal.cpp)
# Usage: scripts/consumption-tests.sh [BUILD_DIR]   (default build/release, already built)
# Writes under build/consume/. Each consumer runs on the default device; app_record runs with the
# validation layer (synchronization validation included) and fails on any message.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${1:-build/release}"
out="$PWD/build/consume"
prefix="$out/prefix"
rm -rf "$out"
mkdir -p "$out"

part() { echo "--- consumption: $* ($(date -u +%H:%M:%S))"; }

part "install $build_dir into $prefix"
cmake --install "$build_dir" --prefix "$prefix" >/dev/null

part "find_package(vkattn): examples/"
cmake -S examples -B "$out/find_package" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$out/find_package"
"$out/find_package/readme_example"
"$out/find_package/minimal"
"$out/find_package/decode_loop"
"$out/find_package/context_parallel"
"$out/find_package/mla_decode" --steps 2
"$out/find_package/app_record" --validate

part "find_package(vkattn <version>): the package version is SameMajorVersion-compatible"
version="$(sed -n 's/^project(vkattn VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)"
major="${version%%.*}"
mkdir -p "$out/version_check"
cat >"$out/version_check/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.25)
project(vkattn_version_check LANGUAGES CXX)
find_package(vkattn ${major}.0 REQUIRED)            # same major, older minor: accepted
find_package(vkattn $((major + 1)) QUIET)           # next major: refused
if(vkattn_FOUND)
  message(FATAL_ERROR "find_package(vkattn $((major + 1))) accepted vkattn \${vkattn_VERSION}")
endif()
CMAKE
cmake -S "$out/version_check" -B "$out/version_check/build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null

part "add_subdirectory(vkattn): tests/consume/add_subdirectory/"
cmake -S tests/consume/add_subdirectory -B "$out/add_subdirectory" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DVKATTN_SOURCE_DIR="$PWD" >/dev/null
cmake --build "$out/add_subdirectory" -j"$(nproc)"
"$out/add_subdirectory/minimal"

part "pkg-config --cflags --libs vkattn"
pc_dir="$(dirname "$(find "$prefix" -name vkattn.pc -print -quit)")"  # lib/ or lib/<multiarch>/
export PKG_CONFIG_PATH="$pc_dir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
[ "$(pkg-config --modversion vkattn)" = "$version" ] ||
  { echo "consumption: pkg-config's version differs from CMakeLists.txt's project(VERSION)"; exit 1; }
# shellcheck disable=SC2046  # the flags are meant to split into words
c++ -std=c++20 -O2 examples/minimal.cpp -o "$out/minimal_pkgconfig" $(pkg-config --cflags --libs vkattn)
"$out/minimal_pkgconfig"

part "all consumers built and ran"
