#!/usr/bin/env bash
# Builds the libFuzzer targets (the `fuzz` preset: clang, ASan + UBSan + libFuzzer; tests/fuzz/) and
# runs each for a bounded time over a scratch copy of its corpus in tests/fuzz/corpus/<corpus>/. Any
# finding — a crash, undefined behaviour, a leak, an input slower than 10 s, more than 2 GiB — fails,
# with the input saved under build/fuzz/artifacts/ and the command that replays it printed.
#
#   scripts/fuzz.sh                    every target for 60 s, as many at a time as there are cores
#   scripts/fuzz.sh -t 600 fuzz_npz    one target, longer
#   scripts/fuzz.sh -u                 also merge the inputs that found new coverage into the corpus
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=60
update=0
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    -t|--seconds) seconds="$2"; shift 2 ;;
    -u|--update-corpus) update=1; shift ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
# target -> corpus directory and dictionary
declare -A corpus=([fuzz_check_attention]=check_attention [fuzz_reference_args]=reference_args
                   [fuzz_mha_args]=mha_args [fuzz_varlen_args]=varlen_args [fuzz_paged_args]=paged_args
                   [fuzz_npy]=npy [fuzz_npz]=npz)
declare -A dict=([fuzz_npy]=tests/fuzz/npy.dict [fuzz_npz]=tests/fuzz/npz.dict)
if [ ${#targets[@]} -eq 0 ]; then targets=(fuzz_check_attention fuzz_reference_args fuzz_mha_args fuzz_varlen_args fuzz_paged_args fuzz_npy fuzz_npz); fi
for t in "${targets[@]}"; do
  [ -n "${corpus[$t]:-}" ] || { echo "fuzz.sh: unknown target $t (known: ${!corpus[*]})" >&2; exit 2; }
done

cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j"$(nproc)"

bin=build/fuzz/fuzzers
artifacts=build/fuzz/artifacts
scratch=build/fuzz/scratch
mkdir -p "$artifacts"
# One target: its run over a scratch copy of its corpus, its summary into $artifacts/$t.summary, and
# exit 0 when clean. The targets run side by side, as many at a time as there are cores (each fuzzer
# is one thread): 7 targets take 4 rounds of their time on 2 cores instead of 7.
fuzz_one() {
  local t=$1 seeds="tests/fuzz/corpus/${corpus[$1]}" start=$SECONDS
  mkdir -p "$seeds"
  rm -rf "${scratch:?}/$t" && mkdir -p "$scratch/$t"
  cp -r "$seeds/." "$scratch/$t/"
  local args=(-max_total_time="$seconds" -rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=10 -max_len=8192
              -print_final_stats=1 -artifact_prefix="$artifacts/$t-")
  [ -n "${dict[$t]:-}" ] && args+=(-dict="${dict[$t]}")
  {
    echo "--- $t: ${seconds} s from $(find "$seeds" -type f | wc -l) seeds"
    if ! "$bin/$t" "${args[@]}" "$scratch/$t" > "$artifacts/$t.log" 2>&1; then
      tail -n 60 "$artifacts/$t.log"
      echo "--- $t: FOUND A PROBLEM; replay: $bin/$t $artifacts/$t-<crash|leak|timeout|oom>-*"
      return 1
    fi
    grep -E "^#[0-9]+.*DONE|stat::number_of_executed_units" "$artifacts/$t.log" | tail -2
    echo "--- $t: clean ($((SECONDS - start)) s)"
  } > "$artifacts/$t.summary" 2>&1
}
# (Each target's outcome goes to a file: a status reaped by `wait -n` is not there for a later wait.)
jobs_max=$(nproc)
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n || true; done
  rm -f "$artifacts/$t.clean"
  (fuzz_one "$t" && touch "$artifacts/$t.clean") &
done
wait
failed=()
for t in "${targets[@]}"; do
  cat "$artifacts/$t.summary"
  [ -f "$artifacts/$t.clean" ] || failed+=("$t")
  if [ "$update" = 1 ]; then
    seeds="tests/fuzz/corpus/${corpus[$t]}"
    "$bin/$t" -merge=1 "$seeds" "$scratch/$t" > "$artifacts/$t.merge.log" 2>&1
    echo "--- $t: corpus now $(find "$seeds" -type f | wc -l) files, $(du -sk "$seeds" | cut -f1) KiB"
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: findings in ${failed[*]}" >&2
  exit 1
fi
