#!/usr/bin/env bash
# Installs the Debian 12 packages mlc needs that are not installed yet.
# Run as root, or with sudo available.  Safe to run again: it installs nothing
# when everything is there.
set -euo pipefail
pkgs=(
  build-essential cmake ninja-build pkg-config git   # build
  clang llvm-14-dev libclang-rt-14-dev               # CPU backend, libFuzzer, sanitizers, Metal emulation (clang++)
  libxxhash-dev libcjson-dev libcmocka-dev           # hashing, JSON, unit tests
  python3 python3-torch python3-numpy                # the numerical reference
  python3-pip python3-setuptools                     # pip install python/ (build.install)
  python3-sklearn                                    # the digits data set of examples/digits (ref.digits)
  bible-kjv                                          # the King James Bible (and bible-kjv-text) of examples/kjv (ref.kjv)
  valgrind                                           # runtime memory checks
  openmpi-bin libopenmpi-dev iproute2                # FSDP on the CPU: mpirun, the collectives, ip netns (tests label dist)
  spirv-tools spirv-headers libvulkan-dev            # SPIR-V target: validator, optimizer, headers
  mesa-vulkan-drivers vulkan-validationlayers        # Vulkan on the CPU (lavapipe) for the spirv tests, validated
  libprotobuf-c-dev protobuf-c-compiler libonnx-dev  # ONNX frontend: protobuf-c, protoc-c, onnx.proto
  libonnx-testdata python3-onnx                      # ONNX conformance tests (tests/onnx/)
)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#pkgs[@]} packages are installed"
  exit 0
fi
echo "deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
