# Sourced by the SPIR-V GPU scripts (bench/spirv_h200.sh, spirv_gemm_h200.sh,
# spirv_attention_h200.sh) once they are in the repository's root: where the
# logs go ($OUT, else the default given as $1), the Vulkan loader from the
# carried .gl debs (the device's README.md says why), NVIDIA's ICD, the
# carried build-vkgpu binaries and their libraries, and a kernel cache.
out=${OUT:-$1}
mkdir -p "$out"
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export LD_LIBRARY_PATH=$PWD/build-vkgpu/lib:${LD_LIBRARY_PATH:-}
export XDG_CACHE_HOME=/tmp/mlc-cache PYTHONUNBUFFERED=1 MLC_VK_VALIDATE=0
if ! ls /usr/share/vulkan/icd.d/nvidia* /etc/vulkan/icd.d/nvidia* > /dev/null 2>&1; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
mlc=build-vkgpu/mlc
opcheck=build-vkgpu/codegen/cuda/mlc_opcheck
