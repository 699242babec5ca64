#!/usr/bin/env bash
# Puts Mesa 25.0.7's lavapipe (Debian bookworm-backports) beside the system's Mesa 22.3.6, without
# replacing it, and prints the Vulkan loader's ICD file for it:
#
#   VK_DRIVER_FILES=$(bash scripts/install-mesa-backports.sh) ./build/release/tools/vkattn conform --quick
#
# Two driver versions are two devices: lavapipe 25.0.7 runs vkattn's kernels faster, but its JIT
# compiles large shaders several times more slowly on a fresh machine (docs/devices.md), so the
# default install keeps 22.3.6 and CI runs the whole suite there and the quick conformance cases here.
#
# The package comes from apt (bookworm-backports is added to apt's sources when missing) and is
# unpacked into DIR (default /opt/vkattn/mesa-25.0.7) rather than installed: its lavapipe needs none
# of the newer libraries the package's dependencies name (libdrm is for GPU drivers). Idempotent.
set -euo pipefail

version="25.0.7-2~bpo12+1"
dir="${1:-/opt/vkattn/mesa-25.0.7}"
icd="$dir/lvp_icd.json"
lib="$dir/root/usr/lib/x86_64-linux-gnu/libvulkan_lvp.so"

if [ -f "$icd" ] && [ -f "$lib" ]; then
  echo "$icd"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

sources=/etc/apt/sources.list.d/bookworm-backports.sources
if ! apt-cache policy mesa-vulkan-drivers 2>/dev/null | grep -q "bookworm-backports"; then
  if [ ! -f "$sources" ]; then
    printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' |
      $SUDO tee "$sources" >/dev/null
  fi
  $SUDO apt-get update -qq >&2
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
chmod 777 "$work"  # apt's download user (_apt) writes there
(cd "$work" && apt-get download -qq "mesa-vulkan-drivers=$version" >&2)
$SUDO mkdir -p "$dir"
$SUDO dpkg-deb -x "$work"/mesa-vulkan-drivers_*.deb "$dir/root"
# The package's ICD file names the library without a path (the system's); this one names the copy.
printf '{\n    "file_format_version": "1.0.0",\n    "ICD": {\n        "library_path": "%s",\n        "api_version": "1.4.305"\n    }\n}\n' "$lib" |
  $SUDO tee "$icd" >/dev/null
echo "$icd"
