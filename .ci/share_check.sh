#!/usr/bin/env bash
# The sharing promise, checked on the run in this checkout (README, "Share your results"):
#   A (this checkout) pushes its outputs and run cache to a DVC remote; B, a fresh `git clone`
#   of this checkout pointed at the same remote, runs `dvc pull` and `dvc repro`: only
#   locate_data (which always looks where the data is) runs, no tracked file changes, and B's
#   `dvc metrics show` is A's.
# The remote is a folder in a temporary directory, added to this checkout as the local-only
# remote `share-check` and removed at the end; B uses the documented override of the default
# remote (`dvc remote modify --local storage url ...`).
#
# Usage: .ci/share_check.sh   after a run (e.g. `make repro PROFILE=tiny`) whose dvc.lock and
# params.yaml are committed. CI runs it right after its first tiny run. Needs the data mirror
# (CTXREP_DATA_MIRROR) that the run used, for B's locate_data.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
DVC=${DVC:-$repo/.venv/bin/dvc}
bin=$(dirname "$DVC")
export PATH="$bin:$PATH"   # the stages' `python` and `ctxrep` are this venv's

if ! git diff --quiet HEAD -- dvc.lock params.yaml; then
  echo "share check: commit dvc.lock and params.yaml first (B clones the commit)" >&2
  exit 2
fi

tmp=$(mktemp -d)
cleanup() {
  "$DVC" remote remove --local share-check >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT

echo "share check: A pushes to $tmp/remote"
"$DVC" remote add --local share-check "$tmp/remote"
"$DVC" push -q -r share-check --run-cache

git clone -q "$repo" "$tmp/b"
cd "$tmp/b"
export DVC_SITE_CACHE_DIR="$tmp/b/.dvc/tmp/site-cache" PYTHONPATH="$tmp/b/src"
"$DVC" remote modify --local storage url "$tmp/remote"
echo "share check: B pulls into a fresh clone and reproduces"
"$DVC" pull -q
"$DVC" repro > "$tmp/repro.log" 2>&1 || { cat "$tmp/repro.log" >&2; exit 1; }
ran=$(grep '^Running stage' "$tmp/repro.log" || true)
if [ "$ran" != "Running stage 'locate_data':" ]; then
  echo "share check: B's dvc repro ran stages besides locate_data:" >&2
  echo "$ran" >&2
  exit 1
fi
if [ -n "$(git status --porcelain)" ]; then
  echo "share check: B's dvc repro changed tracked files:" >&2
  git status --porcelain >&2
  exit 1
fi
theirs=$(cd "$repo" && "$DVC" metrics show --json)
ours=$("$DVC" metrics show --json)
if [ "$theirs" != "$ours" ] || [ "$ours" = "{}" ]; then
  echo "share check: B's metrics differ from A's:" >&2
  diff <(echo "$theirs") <(echo "$ours") >&2 || true
  exit 1
fi
echo "share check: B pulled A's run; dvc repro executed only locate_data; metrics equal"
