#!/usr/bin/env bash
# Installs the Debian (bookworm) packages vkattn needs to build, test and run on lavapipe.
# Idempotent: packages already present are skipped, and apt is not touched when nothing is missing.
set -euo pipefail

packages=(
  cmake g++ ninja-build pkg-config
  libvulkan-dev vulkan-tools
  glslc libshaderc-dev spirv-tools
  mesa-vulkan-drivers vulkan-validationlayers
  doctest-dev libcli11-dev nlohmann-json3-dev
  python3-numpy
  # bench/report.py's plots (docs/perf/*.png), which CI's performance docs step redraws.
  python3-matplotlib
  zlib1g-dev libpng-dev
  # The Python package (VKATTN_BUILD_PYTHON, python/): pybind11 for the extension module, pytest for
  # tests/python, venv for an install test of `pip install --no-build-isolation .`.
  pybind11-dev python3-pybind11 python3-pytest python3-venv
  # The libFuzzer targets (scripts/fuzz.sh): clang and its runtime libraries (libFuzzer, ASan, UBSan).
  clang libclang-rt-14-dev
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
