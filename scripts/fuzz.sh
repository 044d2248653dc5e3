#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz/ with clang into build-fuzz/ and
# runs each for TROUPE_FUZZ_SECONDS (default 60) seconds on a copy of its seed
# corpus (tests/fuzz/corpus/<target>/ is never grown). Prints one line per
# target with the executions run. Exits 1 when any target crashed, leaked,
# broke an invariant or timed out, naming it and its reproducer
# (build-fuzz/artifacts/); see docs/fuzzing.md.
#   TROUPE_FUZZ_SECONDS=5 bash scripts/fuzz.sh            # a quick pass
#   TROUPE_FUZZ_TARGETS="spec_yaml config" bash scripts/fuzz.sh
#   TROUPE_FUZZ_JOBS=1 bash scripts/fuzz.sh               # one target at a time
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${TROUPE_FUZZ_SECONDS:-60}
build="build-fuzz"
cxx=${TROUPE_FUZZ_CXX:-clang++}
if ! command -v "$cxx" >/dev/null 2>&1; then
  echo "fuzz: $cxx not found (scripts/setup.sh installs clang and libclang-rt-dev)" >&2
  exit 1
fi

started=$(date +%s)
mkdir -p "$build"
cmake -S tests/fuzz -B "$build" -G Ninja -DCMAKE_CXX_COMPILER="$cxx" >"$build/configure.log" 2>&1 ||
  { cat "$build/configure.log" >&2; exit 1; }
cmake --build "$build" -j2
built=$(date +%s)

targets=${TROUPE_FUZZ_TARGETS:-$(cat "$build/targets.txt")}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$build/artifacts" "$build/logs"
export UBSAN_OPTIONS=print_stacktrace=1

# Targets run TROUPE_FUZZ_JOBS (default 2) at a time, each on one core.
jobs=${TROUPE_FUZZ_JOBS:-2}
run_one() {  # run_one TARGET: fuzzes it; prints its report into $work/$t.report; exit code 0/1
  local t=$1 dict=() rc execs corpus repro log
  case "$t" in
    spec_json | spec_yaml | submit | dispatch) dict=(-dict=tests/fuzz/spec.dict) ;;
    config) dict=(-dict=tests/fuzz/config.dict) ;;
    schedule) dict=(-dict=tests/fuzz/schedule.dict) ;;
  esac
  if [ ! -x "$build/fuzz_$t" ] || [ ! -d "tests/fuzz/corpus/$t" ]; then
    echo "fuzz: $t: no such target (build-fuzz/fuzz_$t and tests/fuzz/corpus/$t/)" >"$work/$t.report"
    return 1
  fi
  cp -r "tests/fuzz/corpus/$t" "$work/$t"
  rm -f "$build/artifacts/$t-"*
  log=$build/logs/$t.log
  set +e
  # libFuzzer stops itself at -max_total_time; the outer timeout is for a
  # target that hangs where libFuzzer's own -timeout cannot reach it.
  timeout --signal=KILL $((seconds * 2 + 120)) "$build/fuzz_$t" -max_total_time="$seconds" \
    -timeout=25 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$build/artifacts/$t-" \
    "${dict[@]}" "$work/$t" >"$log" 2>&1
  rc=$?
  set -e
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  corpus=$(find "$work/$t" -type f | wc -l)
  if [ "$rc" -eq 0 ]; then
    printf 'fuzz: %-10s ok      %10s execs in %ss, corpus %s inputs\n' "$t" "${execs:-?}" "$seconds" "$corpus" >"$work/$t.report"
    return 0
  fi
  {
    repro=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
    printf 'fuzz: %-10s FAILED  %10s execs, exit %s\n' "$t" "${execs:-?}" "$rc"
    echo "fuzz: $t: log $log; reproducer: ${repro:-none written (killed from outside?)}"
    [ -n "$repro" ] && echo "fuzz: $t: rerun with: $build/fuzz_$t $repro"
    grep -n -m1 -E '^==[0-9]+==|ERROR|invariant broken|runtime error|deadly signal' "$log" |
      cut -d: -f1 | { read -r from && sed -n "${from},$((from + 40))p" "$log"; } || tail -n 40 "$log"
  } >"$work/$t.report"
  return 1
}

for t in $targets; do
  while (($(jobs -rp | wc -l) >= jobs)); do wait -n || true; done
  run_one "$t" &
done
wait || true

failed=()
for t in $targets; do
  cat "$work/$t.report" 2>/dev/null || echo "fuzz: $t: no report"
  grep -q "^fuzz: $t *ok " "$work/$t.report" 2>/dev/null || failed+=("$t")
done

finished=$(date +%s)
echo "fuzz: build $((built - started))s, fuzzing $((finished - built))s, ${seconds}s a target"
((${#failed[@]} == 0)) || echo "fuzz: FAILED: ${failed[*]}" >&2
echo "fuzz: $(($(wc -w <<<"$targets") - ${#failed[@]})) passed, ${#failed[@]} failed"
((${#failed[@]} == 0))
