#!/usr/bin/env bash
# Checks that two builds of troupe-scheduler can take over each other's
# store (the KV bucket TROUPE_STATE and the streams TROUPE_INTAKE and
# TROUPE_EVENTS): an older commit's scheduler is killed with SIGKILL and a
# newer one restores from what it left, then the other way round.
#
#   scripts/store-compat.sh OLD_BIN_DIR NEW_BIN_DIR
#
# e.g. (the commit before a change against this checkout):
#   git worktree add /tmp/old <commit> && cmake -S /tmp/old -B /tmp/old/build -G Ninja \
#     && cmake --build /tmp/old/build --target troupe-scheduler
#   scripts/store-compat.sh /tmp/old/build/bin build/bin
#
# One nats-server -js on a free loopback port, one simulated agent
# (NEW_BIN_DIR's troupe-node, 2 GPUs) and the NEW_BIN_DIR troupe CLI; open
# mode (the store's format does not depend on identities). Each direction
# leaves, at the kill: a job that ended (succeeded), one that failed, one
# running across the switch, and one queued behind it. The restored
# scheduler must show the ended ones as they were, let the running one end
# in its first attempt (not run again), and run the queued one. Exit 0 when
# every check passed; each failed check is printed.
set -uo pipefail
OLD=$(cd "${1:?OLD_BIN_DIR}" && pwd)
NEW=$(cd "${2:?NEW_BIN_DIR}" && pwd)
NATS_SERVER=$(command -v nats-server || echo /usr/sbin/nats-server)
DIR=$(mktemp -d /tmp/troupe-compat-XXXXXX)
export TROUPE_HOME=$DIR/home
PIDS=()
SCHED=
FAILED=0

cleanup() {
  for p in "${PIDS[@]}" $SCHED; do kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  if [[ $FAILED -ne 0 ]]; then
    echo "store-compat: logs kept in $DIR"
  else
    rm -rf "$DIR"
  fi
}
trap cleanup EXIT

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
export TROUPE_NATS=nats://127.0.0.1:$PORT
"$NATS_SERVER" -js -a 127.0.0.1 -p "$PORT" -sd "$DIR/store" >"$DIR/nats.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/"$PORT") 2>/dev/null && break; sleep 0.1; done
"$NEW/troupe-node" --nats "$TROUPE_NATS" --name n1 --gpus 2 --gpu-type a100 \
  --state-dir "$DIR/n1" --simulate >"$DIR/node.log" 2>&1 &
PIDS+=($!)

fail() {
  echo "store-compat: FAILED: $*"
  FAILED=1
}

# Waits (at most $2 s) until `troupe status $1` says state $3.
wait_state() {
  local id=$1 within=$2 want=$3 got=
  for _ in $(seq $((within * 10))); do
    got=$("$NEW/troupe" status "$id" --team t --json 2>/dev/null |
      python3 -c 'import json,sys; print(json.load(sys.stdin).get("state",""))' 2>/dev/null)
    [[ $got == "$want" ]] && return 0
    sleep 0.1
  done
  fail "job $id is '$got', not '$want', after ${within}s"
  return 1
}

field() {  # field ID KEY: a field of the job's status JSON
  "$NEW/troupe" status "$1" --team t --json 2>/dev/null |
    python3 -c "import json,sys; print(json.load(sys.stdin).get('$2',''))" 2>/dev/null
}

start_scheduler() {  # BIN_DIR LOG
  "$1/troupe-scheduler" --nats "$TROUPE_NATS" --lease-ttl-ms 2000 >>"$2" 2>&1 &
  SCHED=$!
  for _ in $(seq 200); do
    grep -q "serving on" "$2" 2>/dev/null && return 0
    sleep 0.1
  done
  fail "the scheduler of $1 did not serve within 20 s"
  return 1
}

submit() {  # DURATION_S EXIT GPUS
  "$NEW/troupe" submit --team t --gpus "$3" --env "TROUPE_SIM_DURATION_S=$1" \
    --env "TROUPE_SIM_EXIT=$2" -- true 2>>"$DIR/cli.log" | grep -o 'j-[0-9a-z-]*' | head -1
}

# One direction: FROM's scheduler leaves the store, TO's restores from it.
switch() {  # FROM TO NAME
  local from=$1 to=$2 name=$3
  start_scheduler "$from" "$DIR/$name-from.log" || return
  local ok bad long queued
  ok=$(submit 0.2 0 1)
  bad=$(submit 0.2 3 1)
  [[ -n $ok && -n $bad ]] || { fail "$name: submit refused (cli.log)"; return; }
  wait_state "$ok" 20 succeeded || return
  wait_state "$bad" 20 failed || return
  long=$(submit 6 0 1)
  wait_state "$long" 20 running || return
  queued=$(submit 0.2 0 2)  # both GPUs: waits for the long one
  wait_state "$queued" 10 queued || return
  kill -9 "$SCHED"
  wait "$SCHED" 2>/dev/null
  start_scheduler "$to" "$DIR/$name-to.log" || return
  wait_state "$ok" 20 succeeded
  wait_state "$bad" 20 failed
  [[ $(field "$bad" exit_code) == 3 ]] || fail "$name: $bad lost its exit code"
  wait_state "$long" 30 succeeded
  [[ $(field "$long" attempt) == 1 ]] || fail "$name: $long ran again (attempt $(field "$long" attempt))"
  wait_state "$queued" 30 succeeded
  kill -9 "$SCHED"
  wait "$SCHED" 2>/dev/null
  SCHED=
  echo "store-compat: $name: ok"
}

switch "$OLD" "$NEW" "old->new"
[[ $FAILED -eq 0 ]] && switch "$NEW" "$OLD" "new->old"
# Everything from both directions, as the old build restores it last.
if [[ $FAILED -eq 0 ]]; then
  start_scheduler "$OLD" "$DIR/last.log"
  n=$("$NEW/troupe" jobs --team t --json 2>/dev/null |
    python3 -c 'import json,sys; print(len(json.load(sys.stdin).get("jobs",[])))')
  [[ $n == 8 ]] || fail "the last restore lists $n jobs, not 8"
fi
[[ $FAILED -eq 0 ]] && echo "store-compat: passed ($OLD <-> $NEW)"
exit $FAILED
