# shellcheck shell=bash
# Tools/lib/build.sh: `swift_build ARGS...`, the one way Tools/demo and Tools/install run
# `swift build` (sourced, not run).
#
# The output always goes through a pipe. Writing to a terminal, SwiftPM adds -color-diagnostics
# to every Swift compile command, so a build watched on a terminal and one written to a pipe or
# a log (Tools/packaging/install-check, CI) recompile each other's Swift modules: about 95 s of a
# release build on 2 cores, every time they alternate. Through a pipe, the demo, the install and
# the install check share one .build/release.
#
# Progress: on a terminal, one line redrawn in place; in a pipe or a log, one line per tenth of
# the way instead of one per file (about 900). Every other line (warnings, errors, the summary)
# is printed as it comes. The exit status is swift build's.
swift_build() {
  local redraw=0 width=80
  if [[ -t 1 ]]; then redraw=1 width="$(tput cols 2>/dev/null || echo 80)"; fi
  swift build "$@" 2>&1 | awk -v redraw="$redraw" -v width="$width" '
    /^\[[0-9]+\/[0-9]+\]/ {
      if (redraw) { printf "\r\033[K%s", substr($0, 1, width - 1); fflush(); drawn = 1; next }
      split(substr($1, 2, length($1) - 2), step, "/")
      tenth = int(10 * step[1] / step[2])
      if (tenth > shown) { shown = tenth; print; fflush() }
      next
    }
    {
      if (drawn) { printf "\r\033[K"; drawn = 0 }
      print; fflush()
    }'
  return "${PIPESTATUS[0]}"
}
