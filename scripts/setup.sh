#!/usr/bin/env bash
# Installs what m2cpp needs to build and test, and nothing that is already
# there: Debian -dev packages through apt, Python test tooling through pip.
# Safe to run repeatedly (it is the first step of `make build`).
set -euo pipefail

DEB_PACKAGES=(
  build-essential cmake pkg-config ccache python3 python3-pip
  libgtest-dev libgmock-dev libbenchmark-dev
  libfmt-dev nlohmann-json3-dev libcli11-dev
  libpcre2-dev libxxhash-dev libutf8proc-dev libboost-dev libssl-dev
  clang libclang-rt-dev
)
# Python packages used only by tests and reference tools (module:package).
PY_PACKAGES=(numpy:numpy pytest:pytest jsonschema:jsonschema tokenizers:tokenizers jinja2:jinja2 openai:openai anthropic:anthropic httpx:httpx ml_dtypes:ml_dtypes prometheus_client:prometheus-client)

missing=()
for p in "${DEB_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

py_missing=()
for entry in "${PY_PACKAGES[@]}"; do
  mod=${entry%%:*}; pkg=${entry#*:}
  python3 -c "import $mod" 2>/dev/null || py_missing+=("$pkg")
done
if ((${#py_missing[@]})); then
  echo "setup: installing Python test packages: ${py_missing[*]}"
  python3 -m pip install -q "${py_missing[@]}" 2>/dev/null \
    || python3 -m pip install -q --break-system-packages "${py_missing[@]}"
fi

# CUTLASS's C++ headers for the grouped FP8 MoE's GEMMs (src/backend/cuda/
# moe_cutlass.cu, CMake M2CPP_CUTLASS, on when they are found) and
# bench/cutlass_moe_bench.cu, from the PyPI package nvidia-cutlass (module
# cutlass_library, headers under its source/include). M2CPP_CUTLASS=0 skips
# it. Headers only: --no-deps skips the Python generator's needs
# (cuda-python, scipy, ...), which we do not use.
CUTLASS_PACKAGE=nvidia-cutlass==4.2.0.0
if [[ "${M2CPP_CUTLASS:-1}" != 0 ]] &&
  ! python3 -c "import importlib.util as u, sys; s = u.find_spec('cutlass_library'); sys.exit(s is None)" 2>/dev/null; then
  echo "setup: installing $CUTLASS_PACKAGE (headers only)"
  python3 -m pip install -q --no-deps "$CUTLASS_PACKAGE" 2>/dev/null \
    || python3 -m pip install -q --no-deps --break-system-packages "$CUTLASS_PACKAGE"
fi

# FlashInfer's C++ headers for the prefill attention over BF16 caches
# (src/backend/cuda/attention/flashinfer_prefill.cu, CMake M2CPP_FLASHINFER, on with
# CUTLASS). 0.6.6: the last release whose headers build with CUDA 13.0's
# CCCL (later ones need cuda::fast_mod_div) and that bundles the CUTLASS we
# use (4.2). Headers only: --no-deps skips torch and the JIT's needs.
FLASHINFER_PACKAGE=flashinfer-python==0.6.6
if [[ "${M2CPP_CUTLASS:-1}" != 0 && "${M2CPP_FLASHINFER:-1}" != 0 ]] &&
  ! python3 -c "import importlib.util as u, os, sys; s = u.find_spec('flashinfer'); sys.exit(s is None or not os.path.exists(s.submodule_search_locations[0] + '/data/include/flashinfer/attention/hopper/prefill_sm90.cuh'))" 2>/dev/null; then
  echo "setup: installing $FLASHINFER_PACKAGE (headers only)"
  python3 -m pip install -q --no-deps "$FLASHINFER_PACKAGE" 2>/dev/null \
    || python3 -m pip install -q --no-deps --break-system-packages "$FLASHINFER_PACKAGE"
fi

# xgrammar's C++ sources for constrained decoding (cmake/xgrammar.cmake builds
# its core into the binary; docs/decisions/constrained-decoding-xgrammar.md):
# the PyPI sdist, pinned by version and SHA-256, unpacked into third_party/.
# pip downloads only the sdist (--no-deps); nothing of it is installed.
XGRAMMAR_VERSION=0.2.9
XGRAMMAR_SHA256=87b466bca2475e29bb0323abc62c6c33cbcbcff47e5fb800a3e2099ac9620b90
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
xg_dir="$root/third_party/xgrammar-$XGRAMMAR_VERSION"
if [[ ! -f "$xg_dir/include/xgrammar/xgrammar.h" ]]; then
  echo "setup: downloading the xgrammar $XGRAMMAR_VERSION sdist (C++ sources)"
  tmp=$(mktemp -d)
  python3 -m pip download -q --no-deps --no-binary xgrammar "xgrammar==$XGRAMMAR_VERSION" -d "$tmp"
  tarball="$tmp/xgrammar-$XGRAMMAR_VERSION.tar.gz"
  echo "$XGRAMMAR_SHA256  $tarball" | sha256sum -c --quiet -
  mkdir -p "$root/third_party"
  tar -xzf "$tarball" -C "$root/third_party"
  rm -rf "$tmp"
fi
