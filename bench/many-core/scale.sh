#!/usr/bin/env bash
# `make bench-scale` on a lent many-core machine, with what bench/many-core/pack.sh carried in
# .dev/: one run of every row for N = 1, 2, 4, 8 queues (about 5 minutes on 16 CPUs), then the
# results (JSON, SCALE.md's section, the chart) copied to $OUT, which the device tool brings
# back. Environment as bench/scale.py's: RUNS (1 here), DURATION (4 here), NS_LIST, ONLY.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DEV=$ROOT/.dev
[ -x "$DEV/wrap/wirespeed" ] || { echo "scale: no .dev/wrap/wirespeed: run bench/many-core/pack.sh and carry .dev" >&2; exit 1; }
OUT=${OUT:-/tmp/scale-out}
mkdir -p "$OUT"
# The carried tools come first, the machine's own after them (python3 is the machine's).
export PATH=$DEV/wrap:$PATH
export WS=$DEV/wrap/wirespeed RUNS=${RUNS:-1} DURATION=${DURATION:-4}
{
    echo "== $(uname -r), $(nproc) CPUs,$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
    lscpu 2>/dev/null | grep -E '^(Thread|Core|Socket|NUMA node\(s\))'
    "$WS" --version
} | tee "$OUT/machine.txt"
python3 "$ROOT/bench/scale.py"
rc=$?
cp "$ROOT"/bench/results/*-scale-*.json "$ROOT/bench/SCALE.md" "$OUT/" 2>/dev/null
cp "$ROOT"/bench/scale-*.png "$OUT/" 2>/dev/null
exit $rc
