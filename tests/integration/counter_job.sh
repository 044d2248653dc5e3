#!/bin/sh
# counter_job.sh: a test job that follows Troupe's checkpoint contract
# (docs/checkpointing.md). It counts up every COUNTER_INTERVAL seconds; on
# SIGUSR1 (the checkpoint signal) it writes its counter to
# $TROUPE_CHECKPOINT_DIR/ckpt-<n>, marks it by renaming a file `latest` that
# holds "ckpt-<n>" into place, and exits 0; on start it resumes from
# $TROUPE_RESUME_FROM when that is set; it exits 0 once the counter reaches
# COUNTER_TARGET.
#
# Environment (besides Troupe's TROUPE_CHECKPOINT_DIR, TROUPE_RESUME_FROM,
# TROUPE_ATTEMPT, TROUPE_RANK):
#   COUNTER_OUT         file the lines below are appended to (required)
#   COUNTER_TARGET      count to reach, then exit 0 (default 50)
#   COUNTER_INTERVAL    seconds between counts (default 0.1)
#   COUNTER_CKPT_EVERY  also checkpoint every N counts (default 0: only on SIGUSR1)
#
# Lines appended to COUNTER_OUT (times in ms since the epoch):
#   <attempt> <counter> <ms>                           a count (rank 0 only)
#   start <attempt> <rank> <pid> <resume-from|-> <counter> <ms>
#   ckpt <attempt> <counter> <name> <ms>               a finished checkpoint (rank 0)
#   exit <attempt> <rank> <why> <counter> <ms>         why: done | checkpointed | sigterm
set -u

out=${COUNTER_OUT:?COUNTER_OUT must name a file}
target=${COUNTER_TARGET:-50}
interval=${COUNTER_INTERVAL:-0.1}
every=${COUNTER_CKPT_EVERY:-0}
attempt=${TROUPE_ATTEMPT:-0}
rank=${TROUPE_RANK:-0}
dir=${TROUPE_CHECKPOINT_DIR:-}
resume=${TROUPE_RESUME_FROM:-}

now() { date +%s%3N; }
line() { printf '%s\n' "$*" >>"$out"; }

counter=0
if [ -n "$resume" ]; then
  if [ -r "$resume" ]; then
    counter=$(cat "$resume")
    case $counter in '' | *[!0-9]*) counter=0 ;; esac
  else
    echo "counter_job: cannot read TROUPE_RESUME_FROM=$resume" >&2
  fi
fi
line "start $attempt $rank $$ ${resume:--} $counter $(now)"

checkpoint() {
  [ "$rank" = 0 ] || return 0
  [ -n "$dir" ] || { echo "counter_job: no TROUPE_CHECKPOINT_DIR" >&2; return 1; }
  name="ckpt-$counter"
  # Write the checkpoint, then mark it finished: `latest` appears atomically.
  printf '%s\n' "$counter" >"$dir/$name.tmp.$$" && mv -f "$dir/$name.tmp.$$" "$dir/$name" &&
    printf '%s\n' "$name" >"$dir/latest.tmp.$$" && mv -f "$dir/latest.tmp.$$" "$dir/latest" &&
    line "ckpt $attempt $counter $name $(now)"
}

asked=
trap 'asked=1' USR1
trap 'line "exit $attempt $rank sigterm $counter $(now)"; exit 143' TERM

while [ "$counter" -lt "$target" ]; do
  # The agent signals the whole process group: a pending sleep dies with it,
  # and the trap has run by the time we look at $asked.
  sleep "$interval" 2>/dev/null
  if [ -n "$asked" ]; then
    checkpoint
    line "exit $attempt $rank checkpointed $counter $(now)"
    exit 0
  fi
  counter=$((counter + 1))
  [ "$rank" = 0 ] && line "$attempt $counter $(now)"
  if [ "$every" -gt 0 ] && [ $((counter % every)) -eq 0 ]; then checkpoint; fi
done
line "exit $attempt $rank done $counter $(now)"
exit 0
