#!/usr/bin/env bash
# The floors of the code (docs/architecture.md, "Floors"), checked over the
# #include lines: messages -> bus -> actors (actors/policy: a pure floor
# inside it) -> node, gateway, load. A file may include its own floor and the
# floors below it, never one above; NATS headers only in bus/, CAF only in
# actors/. Also: docs/architecture.md names exactly the atoms the code
# declares (actors/protocol.hpp), and the subjects, streams and buckets of
# bus/subjects.hpp.
# Prints each breach and exits 1 when there is one.
#   scripts/check-includes.sh [REPO_ROOT]      (ctest: include_rules)
set -uo pipefail
root="${1:-$(dirname "$0")/..}"
cd "$root" || exit 2

fail=0
breach() {
  echo "include rule broken: $1" >&2
  fail=1
}

# Known breaches still to be removed (issue 14): each must still exist, so
# this list cannot go stale. "file:included".
allowed=()
is_allowed() {
  local a
  for a in "${allowed[@]}"; do [ "$a" = "$1" ] && return 0; done
  return 1
}

# floor -> the folders its files must not include
declare -A forbidden=(
  [messages]="actors bus node gateway load"
  [bus]="actors node gateway load"
  [actors/policy]="bus node gateway load"
  [actors]="node gateway load"
  [node]="actors gateway load"
  [gateway]="load"
)

seen_allowed=()
while IFS= read -r file; do
  floor=""
  case "$file" in
    messages/*) floor=messages ;;
    bus/*) floor=bus ;;
    actors/policy/*) floor=actors/policy ;;
    actors/*) floor=actors ;;
    node/*) floor=node ;;
    gateway/*) floor=gateway ;;
    *) continue ;;
  esac
  while IFS= read -r inc; do
    [ -z "$inc" ] && continue
    top="${inc%%/*}"
    # node/ may include actors/metrics/: the exporter loop, kept free of CAF
    # (checked below), which troupe-node's --metrics runs on.
    if [ "$floor" = node ] && [[ "$inc" == actors/metrics/* ]]; then
      continue
    fi
    if [ "$floor" = "actors/policy" ] && [ "$top" = "actors" ] && [[ "$inc" != actors/policy/* ]]; then
      breach "$file includes $inc (actors/policy/ is pure: only actors/policy/ and messages/)"
      continue
    fi
    for f in ${forbidden[$floor]}; do
      if [ "$top" = "$f" ]; then
        if is_allowed "$file:$inc"; then
          seen_allowed+=("$file:$inc")
        else
          breach "$file includes $inc ($floor/ must not include $f/)"
        fi
      fi
    done
  done < <(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$file")
  # System headers: NATS only in bus/, CAF only in actors/ (not its policy floor).
  if grep -qE '^#include <nats/' "$file" && [ "$floor" != bus ]; then
    breach "$file includes a NATS header (only bus/ may)"
  fi
  if grep -qE '^#include <caf/' "$file" && { [ "$floor" != actors ]; }; then
    breach "$file includes CAF (only actors/ outside actors/policy/ may)"
  fi
  if [[ "$file" == actors/metrics/* ]] &&
    grep -E '^#include (<caf/|"actors/)' "$file" | grep -qvE '^#include "actors/metrics/'; then
    breach "$file includes CAF or the actors (actors/metrics/ is CAF-free: node/ includes it)"
  fi
  if [ "$floor" = "actors/policy" ] && grep -qE '(steady_clock|system_clock)::now' "$file"; then
    breach "$file reads a clock (actors/policy/ takes time as a value)"
  fi
done < <(find messages bus actors node gateway -name '*.[ch]pp' | sort)

# docs/architecture.md names every atom of actors/protocol.hpp, and no other.
code_atoms=$(sed -n 's/^CAF_ADD_ATOM(troupe, troupe::atoms, \([a-z_]*\),.*/\1/p' actors/protocol.hpp | sort -u)
doc_atoms=$(grep -o '`[a-z_]*_atom`' docs/architecture.md | tr -d '`' | sort -u)
for a in $(comm -23 <(echo "$code_atoms") <(echo "$doc_atoms")); do
  breach "atom $a (actors/protocol.hpp) is missing from docs/architecture.md"
done
for a in $(comm -13 <(echo "$code_atoms") <(echo "$doc_atoms")); do
  breach "docs/architecture.md names $a, which actors/protocol.hpp does not declare"
done

for a in "${allowed[@]}"; do
  found=0
  for s in "${seen_allowed[@]:-}"; do [ "$s" = "$a" ] && found=1; done
  [ $found = 1 ] || breach "the allowed breach $a is gone: remove it from scripts/check-includes.sh"
done

# Subjects: every subject, stream and bucket bus/subjects.hpp names is in
# docs/architecture.md ("## Subjects"), and every one named there exists.
subjects_doc=$(sed -n '/^## Subjects/,/^## /p' docs/architecture.md)
hpp=bus/subjects.hpp
section() {  # the string_view values declared after the comment line $1, up to a blank line
  sed -n "/$1/,/^\$/p" "$hpp" | sed -n 's/^inline constexpr std::string_view k[A-Za-z]* = "\([a-z]*\)";/\1/p'
}
verbs=$(section "User-facing verbs")
kinds=$(section "Agent message kinds")
fixed=$(sed -n 's/^inline constexpr const char\* k[A-Za-z]* = "\([^"]*\)";.*/\1/p' "$hpp")
has() { grep -qF -- "\`$1\`" <<<"$subjects_doc"; }
for v in $verbs; do
  has "troupe.<team>.$v" || grep -qF -- "\`troupe.<team>.$v." <<<"$subjects_doc" || breach "subject troupe.<team>.$v ($hpp) is missing from docs/architecture.md"
done
for k in $kinds; do
  has "troupe.sys.agent.<node>.$k" || has "troupe.sys.node.<node>.$k" ||
    breach "agent message kind $k ($hpp) is missing from docs/architecture.md"
done
for f in $fixed; do
  case "$f" in
    *'*'* | *'>') continue ;;  # wildcards: their subjects are listed one by one
    troupe.* | TROUPE_* | troupe-*) has "$f" || breach "$f ($hpp) is missing from docs/architecture.md" ;;
  esac
done
has "troupe.sys.intake.<team>" || breach "troupe.sys.intake.<team> ($hpp) is missing from docs/architecture.md"
# ... and the other way round.
while IFS= read -r name; do
  case "$name" in
    troupe.\<team\>.events.\<job_id\>) ok=1 ;;
    troupe.\<team\>.submit.\<pool\>) grep -qF 'std::string team_submit_to(' "$hpp" && ok=1 || ok=0 ;;
    troupe.\<team\>.*) grep -qx "${name#troupe.<team>.}" <<<"$verbs" && ok=1 || ok=0 ;;
    troupe.sys.agent.\<node\>.* | troupe.sys.node.\<node\>.*)
      k="${name##*.}"
      { grep -qx "$k" <<<"$kinds" || grep -qx "$k" <<<"$verbs"; } && ok=1 || ok=0 ;;
    troupe.sys.intake.\<team\>) ok=1 ;;
    troupe.sys.intake.\<team\>.handoff) grep -qF 'std::string handoff(' "$hpp" && ok=1 || ok=0 ;;
    troupe.sys.intake.\<team\>.handoff.\<pool\>)
      grep -qF 'std::string handoff(std::string_view team, std::string_view pool)' "$hpp" && ok=1 || ok=0 ;;
    troupe-handoff-\<pool\>) grep -qF 'std::string pool_handoff_consumer(' "$hpp" && ok=1 || ok=0 ;;
    troupe.sys.intake.\<team\>.pipeline) grep -qF 'std::string intake_pipeline(' "$hpp" && ok=1 || ok=0 ;;
    troupe.sys.logs.\<node\>.*) grep -qF 'std::string log_chunks(' "$hpp" && ok=1 || ok=0 ;;
    troupe.sys.*) { grep -qxF "$name" <<<"$fixed" || grep -qx "${name#troupe.sys.}" <<<"$verbs"; } && ok=1 || ok=0 ;;
    *) grep -qxF "$name" <<<"$fixed" && ok=1 || ok=0 ;;
  esac
  [ $ok = 1 ] || breach "docs/architecture.md names $name, which bus/subjects.hpp does not define"
done < <(grep -o '^| `[^`]*`' <<<"$subjects_doc" | sed 's/^| `//; s/`$//')

# A test's name may not hold ';': ctest splits a name there, registers two
# tests that find nothing to run, and fails both (once, a whole CI run).
while IFS= read -r bad; do
  breach "a test name holds ';' (ctest splits it): $bad"
done < <(python3 - "$root" <<'PY'
import pathlib, re, sys
name = re.compile(r'TEST_CASE(?:_METHOD)?\(\s*(?:\w+\s*,\s*)?((?:"(?:[^"\\]|\\.)*"\s*)+)')
for f in sorted(pathlib.Path(sys.argv[1], "tests").rglob("*.cpp")):
    for m in name.finditer(f.read_text(errors="replace")):
        text = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(1)))
        if ";" in text:
            print(f"{f}: {text}")
PY
)

[ $fail = 0 ] && echo "include rules, atoms and subjects: ok"
exit $fail
