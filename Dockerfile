# The CUDA image of `m2cpp serve`, laid out as NVIDIA's NIM containers are:
# the API on port 8000, the model mounted read-only at /model, a non-root
# user, and a health check on /v1/health/ready (ready once the weights are
# on the GPU). Build and run (docs/status.md, "Operations"):
#   docker build -t m2cpp .
#   docker run --gpus all -p 8000:8000 -v /path/to/MiniMax-M2.7:/model:ro m2cpp
# Arguments after the image name replace CMD (the served name), e.g.
#   docker run ... m2cpp --served-model-name m2 'claude-*' --api-key "$KEY"
# CUDA 13.0: the toolkit the CUDA backend and its FlashInfer 0.6.6 headers
# are built with (scripts/setup.sh says why that version).
ARG CUDA_VERSION=13.0.1

FROM nvidia/cuda:${CUDA_VERSION}-devel-ubuntu24.04 AS build
# The distribution's packages, as scripts/setup.sh installs them; the base
# image's tag fixes the Ubuntu release and so their versions.
# hadolint ignore=DL3008
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential cmake pkg-config python3 python3-pip \
      libfmt-dev nlohmann-json3-dev libcli11-dev libpcre2-dev libxxhash-dev libutf8proc-dev \
      libboost-dev libssl-dev \
 && rm -rf /var/lib/apt/lists/*
# Header-only CUDA dependencies from PyPI, pinned as scripts/setup.sh pins them.
RUN python3 -m pip install --no-cache-dir --no-deps --break-system-packages \
      nvidia-cutlass==4.2.0.0 flashinfer-python==0.6.6
WORKDIR /src
COPY . .
# Hopper machine code (the default); pass
# --build-arg CUDA_ARCHS="80-real;89-real;90a-real" for Ampere and Ada too.
ARG CUDA_ARCHS=90a-real
RUN cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DM2CPP_CUDA=ON -DM2CPP_BUILD_TESTS=OFF \
      -DM2CPP_BUILD_BENCH=OFF "-DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCHS}" \
 && cmake --build build -j "$(nproc)" --target m2cpp \
 && install -m 0755 build/m2cpp /usr/local/bin/m2cpp

FROM nvidia/cuda:${CUDA_VERSION}-runtime-ubuntu24.04
# The shared libraries the binary links (the rest of its dependencies are
# header-only), and curl for the health check.
# hadolint ignore=DL3008
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libfmt9 libpcre2-8-0 libxxhash0 libutf8proc3 libssl3t64 curl ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin m2cpp
COPY --from=build /usr/local/bin/m2cpp /usr/local/bin/m2cpp
USER 10001
EXPOSE 8000
# A 229 B-parameter checkpoint takes minutes to stream to the GPU: the
# start period keeps the container from being marked unhealthy meanwhile.
HEALTHCHECK --interval=15s --timeout=5s --start-period=900s --retries=3 \
  CMD ["curl", "-fsS", "-o", "/dev/null", "http://127.0.0.1:8000/v1/health/ready"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["m2cpp", "serve", "-m", "/model", "--host", "0.0.0.0", "--port", "8000"]
CMD ["--served-model-name", "MiniMax-M2.7"]
