#!/usr/bin/env bash
# Smoke test of the container contract of ./Dockerfile's runtime stage with
# podman where no registry is reachable (so nvidia/cuda cannot be pulled):
# an image FROM scratch holding this build's m2cpp, curl and the shared
# libraries they load, with the Dockerfile's user, port, health check,
# stop signal and entrypoint; run on the tiny test model mounted read-only
# at /model. Checks: the health check passes, the process runs as uid
# 10001, /model is read-only, a Responses call through the published port
# answers, SIGTERM stops it with status 0. CPU build; needs root podman
# (runc with cgroupfs: crun refuses this machine's hybrid cgroups).
#   scripts/container_smoke.sh [build/m2cpp]
set -euo pipefail
BIN=$(realpath "${1:-build/m2cpp}")
SRC=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d)
NAME=m2cpp-smoke-$$
PODMAN=(podman --cgroup-manager=cgroupfs --runtime runc)
cleanup() { "${PODMAN[@]}" rm -f "$NAME" >/dev/null 2>&1 || true; rm -rf "$WORK"; }
trap cleanup EXIT

R=$WORK/rootfs
mkdir -p "$R/usr/local/bin" "$R/etc" "$R/tmp" "$R/model"
for b in "$BIN" "$(command -v curl)"; do
  cp "$b" "$R/usr/local/bin/"
  for lib in $(ldd "$b" | grep -o '/[^ ]*'); do mkdir -p "$R$(dirname "$lib")" && cp -L "$lib" "$R$lib"; done
done
echo 'm2cpp:x:10001:10001::/nonexistent:/usr/sbin/nologin' > "$R/etc/passwd"
echo 'm2cpp:x:10001:' > "$R/etc/group"
chmod 1777 "$R/tmp"
# The runtime stage's instructions, copied from ./Dockerfile.
{
  echo "FROM scratch"
  echo "COPY rootfs/ /"
  sed -n '/^USER /p; /^EXPOSE /p; /^STOPSIGNAL /p; /^ENTRYPOINT /p; /^CMD /p' "$SRC/Dockerfile"
  echo 'HEALTHCHECK --interval=2s --timeout=5s --retries=3 CMD ["curl", "-fsS", "-o", "/dev/null", "http://127.0.0.1:8000/v1/health/ready"]'
} > "$WORK/Containerfile"
"${PODMAN[@]}" build -q --format docker -t m2cpp-smoke -f "$WORK/Containerfile" "$WORK" >/dev/null

PORT=18000
"${PODMAN[@]}" run -d --name "$NAME" --ulimit nofile=20000:20000 --ulimit nproc=4096:4096 -p $PORT:8000 \
  -v "$SRC/tests/data/m2-tiny-chat:/model:ro" m2cpp-smoke --served-model-name m2-tiny-chat --threads 1 \
  --kv-cache-dtype f32 >/dev/null
for _ in $(seq 100); do curl -fsS -o /dev/null "http://127.0.0.1:$PORT/v1/health/ready" 2>/dev/null && break; sleep 0.2; done
fail() { echo "container smoke test: FAIL: $*"; exit 1; }
"${PODMAN[@]}" healthcheck run "$NAME" || fail "health check"
echo "health check: healthy"
[[ $("${PODMAN[@]}" inspect "$NAME" --format '{{.Config.User}}') == 10001 ]] || fail "user"
echo "user: 10001"
[[ $("${PODMAN[@]}" inspect "$NAME" --format '{{range .Mounts}}{{.RW}}{{end}}') == false ]] || fail "/model writable"
echo "/model: read-only"
python3 - "$PORT" <<'PY'
import sys, openai
c = openai.OpenAI(base_url=f"http://127.0.0.1:{sys.argv[1]}/v1", api_key="x", max_retries=0)
r = c.responses.create(model="m2-tiny-chat", input="hello", max_output_tokens=5)
assert r.usage.output_tokens == 5, r
print("responses.create through the port:", r.status, r.usage.output_tokens, "tokens")
PY
"${PODMAN[@]}" stop -t 30 "$NAME" >/dev/null
status=$("${PODMAN[@]}" inspect "$NAME" --format '{{.State.ExitCode}}')
[[ $status == 0 ]] || fail "exit status $status after SIGTERM"
echo "SIGTERM: exit 0"
echo "container smoke test: PASS"
