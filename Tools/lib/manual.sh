# shellcheck shell=bash
# Tools/lib/manual.sh: `make_manual NEARBY GENERATE_MANUAL FILE` writes nearby's man page to
# FILE (sourced, not run; Tools/install uses it, and so can a package build).
#
# NEARBY is the built binary, GENERATE_MANUAL swift-argument-parser's generate-manual tool
# (`swift build --product generate-manual`), which reads NEARBY's `--experimental-dump-help`
# and writes mdoc.
#
# generate-manual (swift-argument-parser 1.8.2, MDoc/String+Escaping.swift) keeps only the
# ASCII characters of every text it escapes, so the help's "…", "—" and "§" vanished from the
# page: `nearby accept 'NEARBY:1/…'` became `nearby accept 'NEARBY:1/'`. So it is given the help
# with each character outside ASCII written as an ASCII mark, @@U2026@@ (its code point), and
# each mark then becomes roff's \[u2026], which man renders as the character. Where the output
# device has no such glyph (man in the C locale writes ASCII, where groff would drop it), the
# page defines an ASCII stand-in for the ones the help uses: "...", "--", "S". perl does the
# marking: perl-base is part of every Debian system.
make_manual() {
  local binary="$1" tool="$2" file="$3" work status=0
  work="$(mktemp -d)"
  printf '#!/bin/sh\n%q --experimental-dump-help | perl -CS -pe %q\n' \
    "$binary" 's/([^\x00-\x7F])/sprintf(q(@@U%04X@@), ord($1))/ge' >"$work/nearby"
  chmod +x "$work/nearby"
  if "$tool" "$work/nearby" --output-directory "$work" >&2; then
    # Blank lines in the help's discussions are paragraph breaks: say so in mdoc (man warns
    # otherwise). The stand-ins go after the prologue's .Os.
    sed -e 's/@@U\([0-9A-F]\{4,6\}\)@@/\\[u\1]/g' -e 's/^$/.Pp/' \
      -e '/^\.Os/a .if !c \\[u2026] .char \\[u2026] ...\n.if !c \\[u2014] .char \\[u2014] \\-\\-\n.if !c \\[u00A7] .char \\[u00A7] S' \
      "$work/nearby.1" >"$file" || status=$?
  else
    status=1
  fi
  rm -rf "$work"
  return "$status"
}
