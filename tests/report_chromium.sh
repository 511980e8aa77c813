#!/bin/sh
# report_chromium.sh REPORT_FIXTURE BUNDLE.json OUTDIR
#
# Renders BUNDLE.json into OUTDIR/report.html (with the report_fixture
# helper), opens it in headless Chromium and fails unless the page's own
# inline check wrote data-check="ok" on <body> (every section present, every
# plot drawn) and the browser logged no console message at all (a script
# error, or a blocked fetch: the page's Content-Security-Policy forbids any).
# Then it takes OUTDIR/report.png.  Chromium is required (.ci/deps installs
# it); its absence is a failure, never a skip.
set -eu

if [ $# -ne 3 ]; then
  echo "usage: report_chromium.sh REPORT_FIXTURE BUNDLE.json OUTDIR" >&2
  exit 2
fi
fixture=$1 bundle=$2 out=$3

browser=""
for b in chromium chromium-browser google-chrome-stable google-chrome; do
  if command -v "$b" >/dev/null 2>&1; then browser=$(command -v "$b"); break; fi
done
if [ -z "$browser" ]; then
  echo "report_chromium: no Chromium found; install the 'chromium' package (.ci/deps)" >&2
  exit 1
fi

rm -rf "$out"
mkdir -p "$out"
out=$(cd "$out" && pwd)
"$fixture" "$bundle" "$out" >/dev/null

profile=$(mktemp -d "${TMPDIR:-/tmp}/moetune-chromium-XXXXXX")
trap 'rm -rf "$profile"' EXIT INT TERM

# --no-sandbox: CI runs as root in a container; --disable-dev-shm-usage: a
# small /dev/shm there.  timeout: a wedged browser fails the test instead of
# hanging it.
run_browser() {
  log=$1
  shift
  timeout -k 5 60 "$browser" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
    --no-first-run --no-default-browser-check --disable-extensions --hide-scrollbars \
    --user-data-dir="$profile" --enable-logging=stderr --v=0 "$@" \
    "file://$out/report.html" 2>"$log"
}

status=0
run_browser "$out/chromium-dom.log" --dump-dom >"$out/dom.html" || status=$?
if [ "$status" -ne 0 ]; then
  echo "report_chromium: chromium --dump-dom failed (exit $status); its log:" >&2
  tail -n 30 "$out/chromium-dom.log" >&2
  exit 1
fi
if ! grep -q 'data-check="ok"' "$out/dom.html"; then
  echo "report_chromium: the page's check did not pass:" >&2
  grep -o 'data-check="[^"]*"' "$out/dom.html" >&2 || echo "  (no data-check: the script did not run)" >&2
  exit 1
fi

run_browser "$out/chromium-shot.log" --screenshot="$out/report.png" --window-size=1280,4000 \
  >/dev/null || status=$?
if [ "$status" -ne 0 ]; then
  echo "report_chromium: chromium --screenshot failed (exit $status); its log:" >&2
  tail -n 30 "$out/chromium-shot.log" >&2
  exit 1
fi

if grep -E 'CONSOLE|Uncaught' "$out/chromium-dom.log" "$out/chromium-shot.log" >&2; then
  echo "report_chromium: the page logged console messages (above)" >&2
  exit 1
fi

if [ ! -s "$out/report.png" ] || [ "$(head -c 4 "$out/report.png" | od -An -c | tr -d ' ')" != '211PNG' ]; then
  echo "report_chromium: no PNG screenshot at $out/report.png" >&2
  exit 1
fi
size=$(wc -c <"$out/report.png")
if [ "$size" -lt 20000 ]; then
  echo "report_chromium: the screenshot is suspiciously small ($size bytes)" >&2
  exit 1
fi
echo "report_chromium: ok ($out/report.html checked; screenshot $out/report.png, $size bytes)"
