#!/usr/bin/env bash
# Measures the brief's §7 targets with troupe-load against a cluster of real
# processes on this machine (docs/performance.md has the figures):
#
#   load/perf/targets.sh [--build DIR] [--perf] MEASURE
#
#   throughput NODES TEAMS JOBS   rate 0: submissions/s acknowledged and placements/s
#                                 on NODES simulated nodes x 8 GPUs, TEAMS teams
#   latency RATE JOBS             p99 submit->placed at a moderate RATE (1,000 nodes, 1-GPU jobs)
#   queued JOBS                   scheduler RSS with JOBS queued: no node of the
#                                 asked GPU type, so every job stays queued
#   backlog QUEUED NODES TEAMS JOBS   QUEUED jobs for h100 first (they stay queued:
#                                 the fleet is a100), then the throughput run
#   retention JOBS RETENTION_S    scheduler RSS idle, after JOBS short jobs ran and
#                                 ended (200 nodes), and once they are past
#                                 --job-retention-s RETENTION_S (purged)
#   shards SHARDS NODES JOBS      scheduler shards (docs/recovery.md "Shards"): two
#                                 pools (a100, h100) of NODES simulated nodes x 8 GPUs
#                                 each, JOBS jobs half for each pool (two troupe-load
#                                 at once), served by one shard holding both pools
#                                 (SHARDS 1) or one shard per pool (SHARDS 2): jobs
#                                 placed per scheduler CPU-second; RATE (environment):
#                                 submissions/s of each troupe-load (default 0: at once);
#                                 ADDRESSED=1: each troupe-load names its pool and
#                                 submits on troupe.<team>.submit.<pool> (read by
#                                 the pool's shard: nothing handed over);
#                                 SCHED_ENV=TROUPE_THREADS=N: N actor threads each;
#                                 ONLY_H100=1: the h100 half only (what a shard that
#                                 places nothing costs); each scheduler's CPU is shown;
#                                 THREADS=1: and each of its threads' CPU and context
#                                 switches, each thread named by its stack (gdb);
#                                 PIN=1: the schedulers on CPU 1, all else on CPU 0;
#                                 PIN=2: each of two shards on a CPU of its own;
#                                 METRICS_OUT=DIR with SCHED_ARGS="--metrics
#                                 127.0.0.1:0": each scheduler's /metrics after
#                                 the run; --perf profiles every scheduler
#   recovery JOBS                 JOBS queued jobs in the state, then kill -9 of the
#                                 scheduler and a new one: time to restore, to serve,
#                                 and until its queues hold every job again
#
# SCHED_ARGS (environment) is added to troupe-scheduler's arguments, e.g.
# SCHED_ARGS="--snapshots sync" to compare snapshot modes (docs/recovery.md).
# PERF_ARGS (environment, --perf): what perf record samples, e.g. "-F 999"
# (flat, lighter than the default call graphs).
# KEEP_LOGS=DIR (environment): the processes' logs are copied there at the end.
# SCHED_ENV (environment) is put in troupe-scheduler's environment, e.g.
# SCHED_ENV="MALLOC_ARENA_MAX=2" or an LD_PRELOAD of another allocator.
# IDLE_PAUSE (environment, retention): seconds to wait after the idle RSS
# before the run starts (to read /proc/PID/smaps at idle). SMAPS_OUT=DIR
# (retention): a copy of /proc/PID/smaps at each RSS figure.
# AGE_S (environment, recovery): seconds between the last submission and
# the kill (default 2).
# SECURE=1 (environment): the production configuration of docs/security.md —
# nats-server in operator mode over TLS with the identities `troupe auth`
# makes; the scheduler, the fleet (one fleet identity) and troupe-load (the
# admin's) each connect with their own. Compare a run with and without.
# SECURE=1 TLS=0: the same identities and permissions over plain TCP.
# NATS_CLUSTER=3 (environment): three nats-servers as one NATS cluster
# (routes on loopback), every process given the three URLs; the scheduler
# gets --replicas ${REPLICAS:-3} (REPLICAS=1 on the same cluster: what
# replication itself costs).
#
# Each run starts its own nats-server -js on a free port, troupe-scheduler
# and (for throughput and latency) troupe-node --simulate --count NODES, and
# prints the troupe-load JSON report, for throughput the CPU seconds each
# process spent during the run (cpu_s), the 1-min load average before and after
# and, with --perf, a `perf report` summary of troupe-scheduler during the run
# (perf record -g, call graphs, inclusive). Everything is stopped at the end.
set -euo pipefail
BUILD=build
PERF=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) BUILD=$2; shift 2 ;;
    --perf) PERF=1; shift ;;
    *) break ;;
  esac
done
MEASURE=${1:?measure: throughput | latency | queued}; shift
BIN=$(cd "$BUILD/bin" && pwd)
NATS=$(command -v nats-server || echo /usr/sbin/nats-server)
DIR=$(mktemp -d /tmp/troupe-perf-XXXXXX)
PIDS=()
cleanup() {
  for ((i=${#PIDS[@]}-1; i>=0; i--)); do
    p=${PIDS[$i]}
    kill "$p" 2>/dev/null || continue
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  # PERF_OUT=FILE keeps the profile for a closer look (perf report -i FILE).
  if [[ $PERF == 1 && -n ${PERF_OUT:-} ]]; then cp "$DIR/perf.data" "$PERF_OUT" 2>/dev/null || true; fi
  # KEEP_LOGS=DIR keeps the processes' logs.
  if [[ -n ${KEEP_LOGS:-} ]]; then mkdir -p "$KEEP_LOGS" && cp "$DIR"/*.log "$KEEP_LOGS"/ 2>/dev/null || true; fi
  rm -rf "$DIR"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PORT=$(free_port)
URL=nats://127.0.0.1:$PORT
MONITOR=$(free_port)  # CONNZ_OUT=FILE: server 0's monitoring port
SERVERS=${NATS_CLUSTER:-1}
PORTS=($PORT) ROUTES=()
for ((i=1; i<SERVERS; i++)); do PORTS+=($(free_port)); URL="$URL,nats://127.0.0.1:${PORTS[$i]}"; done
for ((i=0; i<SERVERS && SERVERS>1; i++)); do ROUTES+=($(free_port)); done
# nats_conf I AUTH_INCLUDE: server I's config (a cluster member when SERVERS > 1)
nats_conf() {
  printf 'listen: 127.0.0.1:%s\njetstream { store_dir: "%s/js%s" }\n' "${PORTS[$1]}" "$DIR" "$1"
  [[ -z ${CONNZ_OUT:-} || $1 != 0 ]] || printf 'http: 127.0.0.1:%s\n' "$MONITOR"
  if [[ $SERVERS -gt 1 ]]; then
    local r="" p
    for p in "${ROUTES[@]}"; do r="$r${r:+, }\"nats://127.0.0.1:$p\""; done
    printf 'server_name: s%s\ncluster { name: perf, listen: "127.0.0.1:%s", routes: [%s] }\n' \
      "$1" "${ROUTES[$1]}" "$r"
  fi
  [[ -z $2 ]] || printf 'include "auth/%s"\n' "$2"
}
if [[ $SERVERS -gt 1 ]]; then
  SCHED_ARGS="${SCHED_ARGS:-} --replicas ${REPLICAS:-3}"
  echo "NATS cluster: $SERVERS servers, streams and buckets R${REPLICAS:-3}"
fi
SCHED_ID=()
FLEET_ID=()
if [[ ${SECURE:-0} == 1 ]]; then
  "$BIN/troupe" auth init --home "$DIR" >/dev/null
  "$BIN/troupe" auth add-admin admin --home "$DIR" >/dev/null
  conf=nats-auth.conf CA=(--tls-ca "$DIR/auth/ca.pem")
  if [[ ${TLS:-1} == 0 ]]; then conf=nats-auth-notls.conf CA=(); fi
  for ((i=0; i<SERVERS; i++)); do
    nats_conf "$i" "$conf" >"$DIR/nats$i.conf"
    "$NATS" -c "$DIR/nats$i.conf" >"$DIR/nats$i.log" 2>&1 & PIDS+=($!)
  done
  export TROUPE_NATS_CREDS=$DIR/auth/admin-admin.creds TROUPE_HOME=$DIR/no-home
  if [[ ${TLS:-1} == 1 ]]; then export TROUPE_NATS_CA=$DIR/auth/ca.pem; fi
  SCHED_ID=(--creds "$DIR/auth/scheduler.creds" "${CA[@]}")
  FLEET_ID=(--creds "$DIR/auth/fleet-f.creds" "${CA[@]}")
  echo "secure: operator mode, an identity per process, TLS ${TLS:-1}"
else
  for ((i=0; i<SERVERS; i++)); do
    nats_conf "$i" "" >"$DIR/nats$i.conf"
    "$NATS" -c "$DIR/nats$i.conf" >"$DIR/nats$i.log" 2>&1 & PIDS+=($!)
  done
fi
for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.1; done
if [[ $MEASURE == retention ]]; then SCHED_ARGS="${SCHED_ARGS:-} --job-retention-s ${2:-5}"; fi
if [[ $MEASURE == shards ]]; then
  printf 'pools:\n  - {name: a100, gpu_type: a100}\n  - {name: h100, gpu_type: h100}\nteams:\n' >"$DIR/shards.yaml"
  for t in t1 t2 t3 t4; do printf '  - {name: %s, borrow: true}\n' "$t" >>"$DIR/shards.yaml"; done
  if [[ ${1:-2} == 1 ]]; then POOLS=a100,h100; else POOLS=a100; fi
  SCHED_ARGS="${SCHED_ARGS:-} --config $DIR/shards.yaml --pools $POOLS"
fi
env ${SCHED_ENV:-} "$BIN/troupe-scheduler" --nats "$URL" "${SCHED_ID[@]}" --checkpoint-root "$DIR/ckpt" ${SCHED_ARGS:-} >"$DIR/scheduler.log" 2>&1 &
SCHED=$!; PIDS+=($SCHED)
sleep 1

fleet() {  # fleet N: N simulated nodes x 8 a100, waits until all are alive
  if [[ ${SECURE:-0} == 1 ]]; then "$BIN/troupe" auth add-fleet f --count "$1" --home "$DIR" >/dev/null; fi
  "$BIN/troupe-node" --nats "$URL" "${FLEET_ID[@]}" --simulate --count "$1" --gpus 8 --gpu-type a100 \
    --name-prefix f --state-dir "$DIR/fleet" --log-level warn >"$DIR/fleet.log" 2>&1 & PIDS+=($!)
  for _ in $(seq 240); do
    # GPUs the arbiter counts (troupe.sys.queues stays small at 10,000 nodes;
    # troupe.sys.nodes does not).
    g=$(TROUPE_NATS=$URL timeout 20 "$BIN/troupe" queues --json 2>/dev/null |
        python3 -c 'import json,sys; print(sum(p.get("gpus_total",0) for p in json.load(sys.stdin)["pools"]))' 2>/dev/null || echo 0)
    n=$((g / 8))
    [[ "$n" -ge "$1" ]] && { sleep 2; return 0; }
    sleep 0.5
  done
  echo "fleet: only $n of $1 nodes alive" >&2; return 1
}

profile_start() {
  [[ $PERF == 1 ]] || return 0
  # PERF_ARGS: what perf record samples (e.g. "-F 999": flat, lighter).
  # shellcheck disable=SC2086
  perf record ${PERF_ARGS:---call-graph dwarf,32768 -F 199} -p "${PROF_PIDS:-$SCHED}" -o "$DIR/perf.data" >"$DIR/perf.log" 2>&1 & PERF_PID=$!
  sleep 0.5
}
profile_stop() {
  [[ $PERF == 1 ]] || return 0
  kill -INT "$PERF_PID" 2>/dev/null || true
  wait "$PERF_PID" 2>/dev/null || true
  echo "--- perf report (children = inclusive), troupe-scheduler pid $SCHED ---"
  perf report -i "$DIR/perf.data" --children --stdio --no-demangle -g none --percent-limit 3 \
    2>/dev/null | c++filt | grep -v '^$' | cut -c1-240 | head -70 || true
  echo "--- perf report (self) ---"
  perf report -i "$DIR/perf.data" --no-children --stdio -g none --percent-limit 1 \
    2>/dev/null | c++filt | grep -v '^$' | cut -c1-240 | head -45 || true
}

# CPU seconds (user + system, from /proc) each process spent during the
# measured run: what the configuration costs, whatever the VM's speed at
# that moment (a throughput figure on a shared 2-core VM swings by 2x).
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
# "tid name ticks" of each thread of PID (THREADS=1: where a scheduler's CPU goes).
# "tid name ticks switches" of each thread of PID (THREADS=1: where a
# scheduler's CPU goes, and how often each thread slept).
thread_ticks() {
  for t in /proc/"$1"/task/*; do
    awk -v t="${t##*/}" -v cs="$(awk '/ctxt_switches/{s+=$2} END{print s+0}' "$t/status" 2>/dev/null)" \
      '{sub(/^[0-9]+ \(/, ""); n=$0; sub(/\).*/, "", n); sub(/^.*\) /, "");
      print t, n, $12 + $13, cs}' "$t/stat" 2>/dev/null || true  # a thread that ended meanwhile
  done
}
# "tid role" of each thread of PID, from its stack (gdb, when installed): the
# threads all carry the process's name.
thread_roles() {
  command -v gdb >/dev/null || return 0
  timeout 60 gdb -p "$1" -batch -ex "thread apply all bt 30" 2>/dev/null | awk '
    function out() { if (t) print t, (r == "" ? "nats-lib" : r) }
    /^Thread .*LWP/ {out(); t=$0; sub(/.*LWP /, "", t); sub(/\).*/, "", t); r=""; next}
    /^#/ && r == "" {f=($2 ~ /^0x/) ? $4 : $2; sub(/\(.*/, "", f); sub(/^troupe::/, "", f); gsub(/ /, "", f)
      if (f !~ /futex|pthread|^__|clone|start_thread|natsCondition|^\?\?|poll|sigtimedwait|^std/) r=f}
    END {out()}'
}
thread_report() {  # PID BEFORE-FILE AFTER-FILE (the stacks are taken now: gdb stops the process)
  thread_roles "$1" >"$2.roles" || true
  awk -v hz="$(getconf CLK_TCK)" 'FILENAME==ARGV[1]{role[$1]=$2; next}
    FILENAME==ARGV[2]{b[$1]=$3; c[$1]=$4; next}
    {d=$3-b[$1]; if (d>0) printf "  thread %s %s: %.2f CPU s, %d switches\n", $1, ($1 in role ? role[$1] : $2), d/hz, $4-c[$1]}' "$2.roles" "$2" "$3" |
    sort -k4,4 -rn
}
declare -A CPU0
cpu_start() { for p in "${PIDS[@]}"; do CPU0[$p]=$(cpu_ticks "$p"); done; }
cpu_stop() {  # JOBS
  local hz total=0 line="" p name d
  hz=$(getconf CLK_TCK)
  for p in "${PIDS[@]}"; do
    name=$(cat "/proc/$p/comm" 2>/dev/null || echo "?")
    d=$(( $(cpu_ticks "$p") - ${CPU0[$p]:-0} ))
    total=$((total + d))
    line+=" $name $(awk -v t="$d" -v hz="$hz" 'BEGIN{printf "%.2f", t/hz}')"
  done
  read -r lu ls < <(tail -1 "$DIR/load.time") || true
  line+=" troupe-load $(awk -v u="${lu:-0}" -v s="${ls:-0}" 'BEGIN{printf "%.2f", u+s}')"
  echo "cpu_s:$line; all $(awk -v t="$total" -v hz="$hz" -v u="${lu:-0}" -v s="${ls:-0}" -v j="$1" \
    'BEGIN{a=t/hz+u+s; printf "%.2f s, %.2f ms per job", a, 1000*a/j}')"
}

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)  ($(date -u +%FT%TZ), $(nproc) cores, commit $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null))"
case "$MEASURE" in
  throughput)
    NODES=${1:-1000}; TEAMS=${2:-4}; JOBS=${3:-20000}
    fleet "$NODES"
    teams=$(seq -s, -f 't%g' 1 "$TEAMS")
    profile_start
    cpu_start
    TIMEFORMAT='%U %S'
    { time "$BIN/troupe-load" --nats "$URL" --jobs "$JOBS" --rate 0 --teams "$teams" --duration-s 0.05 \
      --deadline-s 300 --scheduler-pid "$SCHED" --json --no-progress || true; } 2>"$DIR/load.time"
    cpu_stop "$JOBS"
    # Grants the arbiter made for these jobs: more than one per job means
    # negotiations that came back unplaced (a node refused: the arbiter
    # counted on room that was not there) and were granted again.
    echo "grants: $(TROUPE_NATS=$URL timeout 20 "$BIN/troupe" queues --json 2>/dev/null |
      python3 -c 'import json,sys; print(json.load(sys.stdin).get("grants", 0))' 2>/dev/null || echo "?") for $JOBS jobs"
    profile_stop ;;
  latency)
    RATE=${1:-1000}; JOBS=${2:-5000}
    fleet 1000
    cpu_start
    TIMEFORMAT='%U %S'
    T0=$(date +%s.%N)
    { time "$BIN/troupe-load" --nats "$URL" --jobs "$JOBS" --rate "$RATE" --mix 1gpu --teams t1,t2,t3,t4 \
      --duration-s 0.5 --deadline-s 120 --scheduler-pid "$SCHED" --json --no-progress || true; } 2>"$DIR/load.time"
    T1=$(date +%s.%N)
    cpu_stop "$JOBS"
    # The CPU the whole cluster used, as a share of this machine's cores: near
    # 1 the processes queue for a core and the latency's tail is that queue.
    echo "wall_s: $(awk -v a="$T0" -v b="$T1" 'BEGIN{printf "%.1f", b-a}'), cores $(nproc)" ;;
  queued)
    JOBS=${1:-100000}
    echo "scheduler before: $(grep -E 'VmHWM|VmRSS' /proc/$SCHED/status | tr -s ' \n' ' ')"
    profile_start
    "$BIN/troupe-load" --nats "$URL" --jobs "$JOBS" --rate 0 --mix 1gpu --teams t1,t2,t3,t4 \
      --gpu-type h100 --deadline-s 1 --scheduler-pid "$SCHED" --json --no-progress || true
    profile_stop
    sleep 2
    echo "scheduler after 2 s: $(grep -E 'VmHWM|VmRSS' /proc/$SCHED/status | tr -s ' \n' ' ')" ;;
  backlog)
    QUEUED=${1:-100000}; NODES=${2:-1000}; TEAMS=${3:-4}; JOBS=${4:-20000}
    "$BIN/troupe-load" --nats "$URL" --jobs "$QUEUED" --rate 0 --mix 1gpu --teams q1,q2,q3,q4 \
      --gpu-type h100 --deadline-s 1 --scheduler-pid "$SCHED" --json --no-progress \
      | python3 -c 'import json,sys; r=json.load(sys.stdin); print("backlog: %d acknowledged at %.0f/s, scheduler RSS %s MB" % (r["acknowledged"], r["submit_rate_per_s"], r["scheduler"]["peak_rss_mb"]))' || true
    fleet "$NODES"
    teams=$(seq -s, -f 't%g' 1 "$TEAMS")
    profile_start
    "$BIN/troupe-load" --nats "$URL" --jobs "$JOBS" --rate 0 --teams "$teams" --duration-s 0.05 \
      --gpu-type a100 --deadline-s 300 --scheduler-pid "$SCHED" --json --no-progress || true
    profile_stop ;;
  retention)
    JOBS=${1:-20000}; KEEP=${2:-5}  # (the scheduler was started with --job-retention-s KEEP)
    fleet 200
    # SMAPS_OUT=DIR (environment): keeps /proc/PID/smaps at each figure, as
    # DIR/1 (idle) .. DIR/4 (62 s later). (rss runs in a subshell: the count
    # is the files already there.)
    rss() {
      if [[ -n ${SMAPS_OUT:-} ]]; then
        mkdir -p "$SMAPS_OUT"
        cp "/proc/$SCHED/smaps" "$SMAPS_OUT/$(( $(ls "$SMAPS_OUT" | wc -l) + 1 ))"
      fi
      grep -E 'VmRSS' "/proc/$SCHED/status" | awk '{print $2/1024 " MB"}'
    }
    echo "scheduler idle: $(rss)"; sleep ${IDLE_PAUSE:-0}
    "$BIN/troupe-load" --nats "$URL" --jobs "$JOBS" --rate 0 --mix 1gpu --teams t1,t2,t3,t4 \
      --duration-s 0.01 --deadline-s 1800 --scheduler-pid "$SCHED" --json --no-progress \
      | python3 -c 'import json,sys; r=json.load(sys.stdin); print("ran: %d jobs, complete %s, placements %.0f/s" % (r["acknowledged"], r.get("complete"), r["placement_rate_per_s"]))' || true
    echo "scheduler after the run: $(rss)"
    sleep $((KEEP + 12))
    echo "scheduler $((KEEP + 12)) s later (past the retention): $(rss)"
    sleep 45  # the purges of the last jobs are done by now, and trimmed
    echo "scheduler $((KEEP + 57)) s later: $(rss)"
    ;;
  shards)
    SHARDS=${1:-2}; NODES=${2:-100}; JOBS=${3:-10000}
    SCHEDS=($SCHED)
    if [[ $SHARDS == 2 ]]; then
      env ${SCHED_ENV:-} "$BIN/troupe-scheduler" --nats "$URL" "${SCHED_ID[@]}" --checkpoint-root "$DIR/ckpt" \
        ${SCHED_ARGS/--pools a100/--pools h100} >"$DIR/scheduler2.log" 2>&1 & SCHEDS+=($!); PIDS+=($!)
    fi
    if [[ ${SECURE:-0} == 1 ]]; then "$BIN/troupe" auth add-fleet f --count "$((2 * NODES))" --home "$DIR" >/dev/null; fi
    for type in a100 h100; do
      "$BIN/troupe-node" --nats "$URL" "${FLEET_ID[@]}" --simulate --count "$NODES" --gpus 8 \
        --gpu-type $type --name-prefix "f$type-" --state-dir "$DIR/fleet-$type" --log-level warn \
        >"$DIR/fleet-$type.log" 2>&1 & PIDS+=($!)
    done
    for _ in $(seq 240); do
      g=$(TROUPE_NATS=$URL timeout 20 "$BIN/troupe" queues --json 2>/dev/null |
          python3 -c 'import json,sys; print(sum(p.get("gpus_total",0) for p in json.load(sys.stdin)["pools"]))' 2>/dev/null || echo 0)
      [[ "$g" -ge $((16 * NODES)) ]] && break
      sleep 0.5
    done
    echo "shards: $SHARDS, GPUs counted: $g of $((16 * NODES))"
    # PIN=1: the schedulers share CPU 1, everything else (nats-server, the
    # fleets, troupe-load) CPU 0: both configurations get the same core for
    # scheduling, and neither competes with the load for it.
    LOADCPU=()
    if [[ ${PIN:-0} == 1 ]]; then
      for p in "${PIDS[@]}"; do
        c=0; for q in "${SCHEDS[@]}"; do [[ $p == "$q" ]] && c=1; done
        taskset -a -p -c "$c" "$p" >/dev/null
      done
      LOADCPU=(taskset -c 0)
    fi
    # PIN=2: each shard of two on a core of its own (CPU 0, CPU 1), with its
    # threads; everything else (and one shard) on any core.
    if [[ ${PIN:-0} == 2 && ${#SCHEDS[@]} == 2 ]]; then
      taskset -a -p -c 0 "${SCHEDS[0]}" >/dev/null
      taskset -a -p -c 1 "${SCHEDS[1]}" >/dev/null
    fi
    declare -A S0
    for p in "${SCHEDS[@]}"; do S0[$p]=$(cpu_ticks "$p"); thread_ticks "$p" >"$DIR/threads-$p"; done
    cpu_start
    TIMEFORMAT='%U %S'
    PROF_PIDS=$(IFS=,; echo "${SCHEDS[*]}"); profile_start
    T0=$(date +%s.%N)
    { [[ ${ONLY_H100:-0} == 1 ]] || time "${LOADCPU[@]}" "$BIN/troupe-load" --nats "$URL" --jobs "$((JOBS / 2))" --rate "${RATE:-0}" --teams t1,t2 --gpu-type a100 ${ADDRESSED:+--pool a100} \
      --mix 1gpu:0.8,8gpu:0.2 --duration-s 0.05 --deadline-s 300 --json --no-progress >"$DIR/load-a.json" || true; } 2>"$DIR/load.time" &
    LA=$!
    "${LOADCPU[@]}" "$BIN/troupe-load" --nats "$URL" --jobs "$((JOBS / 2))" --rate "${RATE:-0}" --teams t3,t4 --gpu-type h100 ${ADDRESSED:+--pool h100} \
      --mix 1gpu:0.8,8gpu:0.2 --duration-s 0.05 --deadline-s 300 --json --no-progress >"$DIR/load-h.json" || true
    wait $LA || true
    T1=$(date +%s.%N)
    profile_stop
    placed=$(python3 -c 'import json,os,sys; print(sum(json.load(open(f)).get("placed", 0) for f in sys.argv[1:] if os.path.exists(f) and os.path.getsize(f)))' "$DIR/load-a.json" "$DIR/load-h.json" 2>/dev/null || echo "?")
    cpu_stop "$placed"  # every process: nats-server, the fleets, the schedulers, the a100 troupe-load
    hz=$(getconf CLK_TCK); sched=0
    declare -A S1
    for p in "${SCHEDS[@]}"; do S1[$p]=$(cpu_ticks "$p"); thread_ticks "$p" >"$DIR/threads-after-$p"; done
    for p in "${SCHEDS[@]}"; do
      d=$(( ${S1[$p]} - ${S0[$p]} )); sched=$((sched + d))
      awk -v t="$d" -v hz="$hz" -v p="$p" 'BEGIN{printf "scheduler %s: %.2f CPU s\n", p, t/hz}'
      if [[ ${THREADS:-0} == 1 ]]; then thread_report "$p" "$DIR/threads-$p" "$DIR/threads-after-$p"; fi
    done
    # CONNZ_OUT=FILE: each connection's messages in and out (NATS /connz),
    # with the pid and name of the process that holds it.
    if [[ -n ${CONNZ_OUT:-} ]]; then
      curl -s "http://127.0.0.1:$MONITOR/connz?limit=1000" | python3 -c '
import json, sys
out = open(sys.argv[1], "w")
for c in sorted(json.load(sys.stdin)["connections"], key=lambda c: -c["in_msgs"] - c["out_msgs"]):
    port = c["port"]
    print("%-24s in %8d out %8d  port %d" % (c.get("name", ""), c["in_msgs"], c["out_msgs"], port), file=out)
' "$CONNZ_OUT" || true
    fi
    # METRICS_OUT=DIR (with SCHED_ARGS="--metrics 127.0.0.1:0"): each
    # scheduler's /metrics after the run, to compare what the shards counted.
    if [[ -n ${METRICS_OUT:-} ]]; then
      mkdir -p "$METRICS_OUT"
      for f in "$DIR"/scheduler*.log; do
        u=$(grep -o 'metrics on [^ ]*' "$f" | head -1 | cut -d' ' -f3)
        [[ -n $u ]] && curl -s "${u%/metrics}/metrics" >"$METRICS_OUT/$(basename "$f" .log).prom" || true
      done
    fi
    for f in a h; do
      python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(sys.argv[2], {k: v for k, v in r.items() if not isinstance(v, list)})' \
        "$DIR/load-$f.json" "$f" 2>/dev/null || true
    done
    awk -v t="$sched" -v hz="$hz" -v j="$placed" -v a="$T0" -v b="$T1" 'BEGIN{
      printf "placed %s jobs in %.1f s wall; schedulers %.2f CPU s: %.0f placements per scheduler CPU-second\n", j, b-a, t/hz, j/(t/hz)}' ;;
  recovery)
    JOBS=${1:-100000}
    "$BIN/troupe-load" --nats "$URL" --jobs "$JOBS" --rate 0 --mix 1gpu --teams t1,t2,t3,t4 \
      --gpu-type h100 --deadline-s 1 --scheduler-pid "$SCHED" --json --no-progress \
      | python3 -c 'import json,sys; r=json.load(sys.stdin); print("state: %d jobs acknowledged at %.0f/s" % (r["acknowledged"], r["submit_rate_per_s"]))' || true
    # Let the last snapshots flush (a kill -9 any earlier is what the tests
    # do). AGE_S=20: the jobs are older than the stream reads' 15 s margin
    # before the last flush, so the restore reads the KV bucket only.
    sleep "${AGE_S:-2}"
    kill -9 "$SCHED"; wait "$SCHED" 2>/dev/null || true
    start=$(date +%s%N)
    cpu_start
    "$BIN/troupe-scheduler" --nats "$URL" "${SCHED_ID[@]}" --checkpoint-root "$DIR/ckpt" ${SCHED_ARGS:-} >"$DIR/scheduler2.log" 2>&1 &
    SCHED=$!; PIDS+=($SCHED)
    profile_start
    for _ in $(seq 1200); do grep -q "serving on" "$DIR/scheduler2.log" && break; sleep 0.05; done
    serving=$(date +%s%N)
    profile_stop
    # CPU seconds from the kill to serving: the new scheduler's restore, and
    # nats-server delivering what it reads.
    echo "cpu_s until serving: $(for p in "${PIDS[@]}"; do
      awk -v n="$(cat /proc/$p/comm 2>/dev/null)" -v t=$(( $(cpu_ticks "$p") - ${CPU0[$p]:-0} )) \
        -v hz="$(getconf CLK_TCK)" 'BEGIN{printf "%s %.2f ", n, t/hz}'; done)"
    for _ in $(seq 1200); do
      q=$(TROUPE_NATS=$URL timeout 20 "$BIN/troupe" queues --json 2>/dev/null |
          python3 -c 'import json,sys; print(sum(t.get("pending_jobs",0) for t in json.load(sys.stdin)["teams"]))' 2>/dev/null || echo 0)
      [[ "$q" -ge "$JOBS" ]] && break
      sleep 0.2
    done
    queued=$(date +%s%N)
    grep -E "leader|restored|serving on" "$DIR/scheduler2.log" || true
    # From its log's timestamps: the lease held -> serving (the issue's figure).
    python3 - "$DIR/scheduler2.log" <<'PY' || true
import re, sys, datetime
t = {}
for line in open(sys.argv[1]):
    m = re.match(r'(\S+Z) ', line)
    if not m: continue
    when = datetime.datetime.strptime(m.group(1), '%Y-%m-%dT%H:%M:%S.%fZ')
    if 'holding the leader lease' in line: t['lease'] = when
    if 'serving on' in line: t['serving'] = when
if 'lease' in t and 'serving' in t:
    print('recovery: serving %d ms after it holds the lease' % ((t['serving'] - t['lease']).total_seconds() * 1000))
PY
    echo "recovery: serving after $(( (serving - start) / 1000000 )) ms (includes the lease TTL: the killed leader's lease must go stale), queues hold $q jobs after $(( (queued - start) / 1000000 )) ms"
    echo "scheduler after: $(grep -E 'VmHWM|VmRSS' /proc/$SCHED/status | tr -s ' \n' ' ')" ;;
  *) echo "unknown measure $MEASURE" >&2; exit 2 ;;
esac
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
