# Sourced by the GPU scripts (tests/gpu/cuda_check.sh, bench/cuda_bench.sh,
# bench/cuda_final.sh) once they are in the repository's root: where the
# logs go ($OUT, else the default given as $1), the carried CUDA-only
# build's libraries, and a cache of compiled kernels of its own.
out=${OUT:-$1}
mkdir -p "$out"
export LD_LIBRARY_PATH=$PWD/build-gpu/lib:${LD_LIBRARY_PATH:-}
export XDG_CACHE_HOME=/tmp/mlc-cache PYTHONUNBUFFERED=1
# The first lines of a GPU script's log, also printed: what ran, when, at
# which commit ($COMMIT: the device's copy of .git may be stale), on what.
gpu_header() {
  { echo "# $1, $(date -u '+%F %T') UTC, commit ${COMMIT:-?}"
    nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } | tee "$2"
}
# For the SPIR-V target: the Vulkan loader from the carried .gl debs (the
# device's README.md says why) and NVIDIA's ICD, without the validation layers.
# .gl must hold libvulkan1 and libglvnd's libegl1 libglvnd0 libopengl0 libgl1
# libglx0 libgles2 (NVIDIA's ICD loads them; with libvulkan1 alone there is
# no driver: bench/results/h100-2026-12-07.md, call 11):
#   (cd .gl && apt-get download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
vk_loader() {
  for f in .gl/*.deb; do dpkg -x "$f" /; done
  ldconfig
  export MLC_VK_VALIDATE=0
  if ! ls /usr/share/vulkan/icd.d/nvidia* /etc/vulkan/icd.d/nvidia* > /dev/null 2>&1; then
    export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
    export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
  fi
}
# The start of a session's GPU script of parts (bench/gpu_s34.sh,
# bench/gpu_s37.sh): $dest ($OUT, else /tmp/mlc-$1) and $work (/tmp/$1-work)
# made, the time budget $limit ($LIMIT, else $2 seconds) that left() counts
# down, $gpu, and the header line.
gpu_session() {
  dest=${OUT:-/tmp/mlc-$1}
  work=/tmp/$1-work
  mkdir -p "$dest" "$work"
  limit=${LIMIT:-$2}
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader)
  echo "GPU: $gpu; commit ${COMMIT:-?}; $(date -u '+%F %T') UTC"
}
left() { echo $((limit - SECONDS)); }
