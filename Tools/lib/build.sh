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
#
# Silence never lasts a minute: a release build's last steps (from about [421/467]) are a few
# big compiles that print nothing for 4-5 minutes, which looked like a hang. A ticker beside the
# build puts a mark into the stream every `build_tick_seconds`; when a minute of marks has passed
# with nothing printed, `build_progress` says "still building (N min, at [421/467])" (in a log,
# a line; on a terminal, the redrawn line gets the minutes). The marks are never printed.
build_tick_seconds=10

# The filter between swift build and the person: `build_progress REDRAW WIDTH TICK_SECONDS`
# reads swift build's output, with a line "\001tick" each TICK_SECONDS, on stdin. Separate from
# swift_build so that a test can feed it a made-up stream (Tools/packaging/install-check).
build_progress() {
  awk -v redraw="$1" -v width="$2" -v tick="$3" '
    BEGIN { idle_limit = int((60 + tick - 1) / tick) }
    $0 == "\001tick" {
      ticks++; idle++
      if (idle < idle_limit) next
      idle = 0
      minutes = int(ticks * tick / 60)
      where = step == "" ? "" : ", at " step
      if (redraw && drawn) {
        suffix = " (still building, " minutes " min)"
        printf "\r\033[K%s%s", substr(current, 1, width - 1 - length(suffix)), suffix; fflush()
      } else {
        if (drawn) { printf "\r\033[K"; drawn = 0 }
        print "still building (" minutes " min" where ")"; fflush()
      }
      next
    }
    /^\[[0-9]+\/[0-9]+\]/ {
      step = $1
      if (redraw) { idle = 0; current = $0; printf "\r\033[K%s", substr($0, 1, width - 1); fflush(); drawn = 1; next }
      split(substr($1, 2, length($1) - 2), parts, "/")
      tenth = int(10 * parts[1] / parts[2])
      if (tenth > shown) { shown = tenth; idle = 0; print; fflush() }
      next
    }
    {
      idle = 0
      if (drawn) { printf "\r\033[K"; drawn = 0 }
      print; fflush()
    }'
}

swift_build() {
  local redraw=0 width=80
  if [[ -t 1 ]]; then redraw=1 width="$(tput cols 2>/dev/null || echo 80)"; fi
  (
    # The ticker's sleep writes nothing to the pipe (stdout to /dev/null), so when the build
    # ends and the ticker is stopped, the filter sees the end of its input at once.
    (while sleep "$build_tick_seconds" >/dev/null; do printf '\001tick\n'; done) &
    local ticker=$! status=0
    swift build "$@" 2>&1 || status=$?
    # (Its end by SIGTERM is no failure: the callers run with set -e.)
    kill "$ticker" 2>/dev/null || true
    wait "$ticker" 2>/dev/null || true
    exit "$status"
  ) | build_progress "$redraw" "$width" "$build_tick_seconds"
  return "${PIPESTATUS[0]}"
}
