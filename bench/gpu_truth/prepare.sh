#!/usr/bin/env bash
# Fetches the wheels a lent GPU machine lacks for bench/gpu_truth (wheels.txt: CPython 3.12,
# manylinux x86-64, one version each, --no-deps) into .whl/ at the checkout's root, which
# .git/info/exclude keeps out of git and out of what travels uncarried. docs/gpu.md says
# how the device command carries and installs them.
#   bash bench/gpu_truth/prepare.sh           # fetch afresh, then check
#   bash bench/gpu_truth/prepare.sh --check   # only check what .whl/ holds
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$(git -C "$here" rev-parse --show-toplevel)"
exclude="$(git rev-parse --git-path info/exclude)"
mkdir -p "$(dirname "$exclude")"
grep -qxF '/.whl/' "$exclude" 2>/dev/null || echo '/.whl/' >>"$exclude"
if [ "${1:-}" != "--check" ]; then
  rm -rf .whl
  python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux1_x86_64 -d .whl -r "$here/wheels.txt"
fi
git check-ignore -q .whl/x.whl || { echo "prepare.sh: .whl/ is not ignored by git" >&2; exit 1; }
python3 -m bench.gpu_truth.wheels .whl
