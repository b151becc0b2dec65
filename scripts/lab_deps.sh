#!/usr/bin/env bash
# What the lab's browser tests (tests/lab/test_browser.py) need on a fresh Debian machine: Debian's
# chromium (installed when missing and apt-get may be run: root), and Playwright for Python in .venv,
# pointed at that browser (no browser download). Idempotent and quiet: prints only what it could not
# do. Without them the browser tests skip with the reason; LAB_DEPS_STRICT=1 makes that an error.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
status=0

missing() {
  echo "lab_deps: $1; the browser tests will skip" >&2
  status=1
}

if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq chromium >/dev/null 2>&1 \
      || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq chromium >/dev/null 2>&1; } \
      || missing "apt-get could not install chromium"
  else
    missing "no chromium, and apt-get needs root"
  fi
fi

if [ ! -x "$PY" ]; then
  missing "no $PY (run scripts/setup.sh first)"
elif ! "$PY" -c "import playwright.sync_api" >/dev/null 2>&1; then
  "$PY" -m pip install -q "playwright>=1.40" >/dev/null 2>&1 || missing "pip could not install playwright"
fi

if [ "${LAB_DEPS_STRICT:-0}" = 1 ]; then
  exit "$status"
fi
exit 0
