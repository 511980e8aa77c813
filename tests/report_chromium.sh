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
# a normal window width: the decision table must wrap in it, not scroll
run_browser "$out/chromium-dom.log" --window-size=1280,4000 --dump-dom >"$out/dom.html" || status=$?
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

# The sections the page's own check cannot judge, read from the rendered DOM:
# decisions numbered 1, 2, 3... in order; each wall's shares add up to 100%;
# every memory figure names its hottest GPU.
nums=$(grep -o '<td class="n dno" rowspan="2">\(<a [^>]*>\)\?[0-9]*' "$out/dom.html" | sed 's/.*>//')
want=1
for n in $nums; do
  if [ "$n" != "$want" ]; then
    echo "report_chromium: decision number $n where $want was due (numbers: $(echo $nums | tr '\n' ' '))" >&2
    exit 1
  fi
  want=$((want + 1))
done
if [ "$want" -eq 1 ]; then
  echo "report_chromium: the decision table has no numbered rows" >&2
  exit 1
fi
for side in before after; do
  sum=$(grep -o "<td class=\"n share-$side\">[0-9.]*%" "$out/dom.html" | sed 's/.*>//; s/%//' |
        awk '{ s += $1; n++ } END { if (n) printf "%.1f", s; else print "none" }')
  case "$sum" in
    99.9|100.0|100.1) ;;
    *) echo "report_chromium: the $side wall's shares add up to $sum%, not 100%" >&2; exit 1 ;;
  esac
done
# a multi-arm screen's value says which it is, and that it was selected
if ! grep -q '<span class="arm">value 2 of 2, selected</span>' "$out/dom.html"; then
  echo "report_chromium: the multi-arm decision does not say 'value 2 of 2, selected'" >&2
  exit 1
fi
mems=$(grep -c '<figcaption><b>[a-z]*</b>: ' "$out/dom.html" || true)
hots=$(grep -o '<span class="hottest">hottest GPU: rank [0-9]* at [0-9.]* GB ([^)]*): [^<]' "$out/dom.html" | wc -l)
if [ "$hots" -lt 1 ] || [ "$hots" -ne "$(grep -o 'data-plot="memory-' "$out/dom.html" | wc -l)" ]; then
  echo "report_chromium: $hots memory figures name their hottest GPU (rank and why), of $mems" >&2
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
