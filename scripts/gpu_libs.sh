# Sourced by the GPU scripts (gpu_check.sh, gpu_load_check.sh).
# gpu_library_path BUILD_DIR: the LD_LIBRARY_PATH our binaries need on the GPU
# machine: the shared libraries `scripts/gpu_check.sh --prepare` copied into
# BUILD_DIR/lib, then cuBLASLt wherever this image has it (the CUDA toolkit,
# or PyTorch's nvidia-cublas wheel), then the caller's own. Only our binaries
# get it (system tools keep theirs).
gpu_library_path() {
  local path=$1/lib dir
  for dir in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib \
    $(find /usr /opt -name 'libcublasLt.so.13*' -printf '%h\n' 2>/dev/null | sort -u | head -3); do
    if [[ -e "$dir/libcublasLt.so.13" ]]; then path=$path:$dir; fi
  done
  echo "$path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}
