#!/usr/bin/env bash
# Ablation on a question set: every retrieval config, with and without query rewriting, through
# `hypa eval run` / `hypa eval report`. Prints one Markdown row per run (overall) plus per-type recall.
#   bench/ablation.sh [DATASET] [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
DATASET=${1:-../shared/data/eval/ll144_dev.jsonl}
OUT=${2:-data/results/ablation}
HYPA=.venv/bin/hypa
mkdir -p "$OUT"
$HYPA index build ll144 >/dev/null 2>&1
runs=(
  "fixed-k3 --no-rewrite" "fixed-k5 --no-rewrite" "fixed-k7 --no-rewrite" "fixed-k10 --no-rewrite"
  "pa-2class --no-rewrite" "pa-3class --no-rewrite"
  "fixed-k5" "fixed-k7" "pa-2class" "pa-3class"
  # issue 3: token budget and novelty rule (bot/retrieval_configs.toml), and their ablations
  "fixed-k7-novelty" "fixed-b1200" "pa-2class-budget"
)
for run in "${runs[@]}"; do
  set -- $run
  name="$1${2:+-norewrite}"
  $HYPA eval run "$DATASET" --out "$OUT/$name.jsonl" --config $run >/dev/null 2>&1
  $HYPA eval report "$OUT/$name.jsonl" --gold "$DATASET" --markdown > "$OUT/$name.md" 2>/dev/null
  echo "== $name"
  grep -E '^\| (all|conversational|double|compare|vague|complex_situational) \|' "$OUT/$name.md"
  grep -E '^\| (out of scope|in scope) \(reviewed\)' "$OUT/$name.md"
done
