#!/usr/bin/env bash
# CUDA checks on a lent GPU machine (never needed for the tests): the contract suites' device cases
# and a toy spec with its server in a process of its own, on CUDA. The machine has torch and most
# packages but no network: the few missing ones travel as wheels in .whl/ (pydantic, pydantic-core,
# annotated-types, typing-inspection, dp-accounting, dm-tree), and the plug-ins are named in
# DPKIT_EXTRA_PLUGINS instead of being installed. Writes its logs to $OUT (or ./device-out).
set -uo pipefail
out=${OUT:-device-out}; mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD:$PWD/plugins:$PWD/examples/dpkit-example-plugin PYTHONUNBUFFERED=1
export DPKIT_LOAD_PLUGINS="" DPKIT_BUDGET_STORE=off DPKIT_CACHE=/tmp/dpkit-cache
export DPKIT_EXTRA_PLUGINS="datasets=dpkit_datasets,models=dpkit_models,attacks=dpkit_attacks,tasks=dpkit_tasks,baselines=dpkit_baselines,stencil=dpkit_stencil,snd=dpkit_snd,dped=dpkit_dped,hiddenecho=dpkit_hiddenecho,obfuslm=dpkit_obfuslm,toy=dpkit.testing.toy"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$out/gpu.txt"
python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name(0))" | tee -a "$out/gpu.txt"
start=$(date +%s)
# every test file with a CUDA case, and the contract suites (their device cases)
files="tests/testing/test_registry_contracts.py $(grep -rl "cuda.is_available" tests | sort)"
python3 -m pytest -q -p no:cacheprovider -o addopts="" --import-mode=importlib -n 8 \
  $files -k "device or cuda" -rs 2>&1 | tee "$out/contracts.log" | tail -25
echo "CUDA tests: $(( $(date +%s) - start )) s" | tee -a "$out/contracts.log"
# the "CPU only" equivalent mutants against their CUDA tests (export them here first:
# python tools/device_mutants.py export .devmut, and carry .devmut)
if [ -f .devmut/manifest.json ]; then
  start=$(date +%s)
  python3 tools/device_mutants.py check .devmut --out "$out/device_mutants.json" --workers 14 \
    2>&1 | tee "$out/mutants.txt" | tail -60
  echo "device mutants: $(( $(date +%s) - start )) s" | tee -a "$out/mutants.txt"
fi
cat > /tmp/toy-cuda.yaml <<YAML
name: toy-cuda
data: {name: toy_text, params: {n_docs: 64}}
model: {name: toy_space}
defense: {name: toy_noise, label: Toy, params: {eta: 1.0}, sweep: {eta: [1.0, 4.0]}}
attacks: [{name: toy_attack}]
seeds: [0, 1]
device: cuda
report: {x: eta, utility: preserved, privacy: toy_top1}
output: /tmp/toy-cuda
YAML
for server in ${TOY_SERVERS:-process inprocess}; do  # TOY_SERVERS=process: one only
  start=$(date +%s.%N)
  DPKIT_SERVER=$server python3 -m dpkit.cli.main run /tmp/toy-cuda.yaml --fresh --no-progress \
    > "$out/toy-$server.log" 2>&1; rc=$?
  echo "toy spec on cuda, server $server: rc $rc, $(python3 -c "print(round($(date +%s.%N) - $start, 1))") s" \
    | tee -a "$out/toy.txt"
  python3 -c "import json; rows=[json.loads(l) for l in open('/tmp/toy-cuda/results.jsonl')]; print([(r['device'], r['metrics']) for r in rows])" \
    >> "$out/toy.txt" 2>&1
done
cat "$out/toy.txt"
cat /tmp/toy-cuda/failures.jsonl 2>/dev/null | head -c 3000
[ -n "${SKIP_OBFUS:-}" ] && exit 0
# obfuslm_table: the same table on both devices, clusters and output statistics side by side
python3 - <<'PY' 2>&1 | tee "$out/obfus.txt"
import torch
from dpkit.testing.strategies_tokens import random_space
from dpkit_obfuslm.mechanism import ObfusTable
from dpkit_obfuslm.params import TableParams
from dpkit_obfuslm.cluster import embed_cluster
space = random_space(64, 8, 0)
for dev in ("cpu", "cuda"):
    x = space.vectors.to(dev)
    c = embed_cluster(x.float(), 10, 0.99)
    print(dev, "sizes", sorted(c.sizes.tolist())[:12], "members sum", int(c.members.clamp(min=0).sum()))
    mech = ObfusTable(TableParams(k=10, epsilon=1.0))
    out = torch.stack([mech.privatize(x, generator=torch.Generator(device=dev).manual_seed(s)).cpu()
                       for s in range(200)])
    print(dev, "row0 mean", out[:, 0].mean(0)[:4].tolist(), "sd", out[:, 0].std(0)[:4].tolist())
PY
