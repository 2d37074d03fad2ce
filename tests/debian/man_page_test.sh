#!/usr/bin/env bash
# ctest man_page: the man page scangate(8) as the package builds it (deploy/debian/man_page.sh from
# deploy/debian/scangate.8.in and the built binary's --help) renders with groff without a single warning (-ww),
# has the sections a man page of a daemon has, documents every option `scangate --help` lists, names no option
# (--name, or SCANGATE_NAME) that --help does not list, and lists every exit code server/app.h defines.
# The check reads the page as rendered (plain text), not the generator's output, so an option lost by the
# generator or named by the hand-written text after it was removed is caught. A self-check first proves each
# check fails on a page broken that way.
# Usage: man_page_test.sh <source dir> <built scangate binary> <work dir>
set -euo pipefail
src=$1 bin=$(realpath "$2") work=$3
deb=$src/deploy/debian

fail() { echo "FAIL: $*" >&2; exit 1; }
command -v groff >/dev/null || fail "groff is missing (Debian package groff-base; scripts/deps.sh test)"
[[ -x $bin ]] || fail "no built binary at $bin"
rm -rf "$work" && mkdir -p "$work"

# The options of --help, one name a line.
"$bin" --help | sed -n 's/^  --\([a-z0-9-]*\).*/\1/p' | sort -u > "$work/help.txt"
(($(wc -l < "$work/help.txt") > 10)) || fail "fewer than 10 options read from --help"
# Words that look like options and are not one: systemctl's --now (DESCRIPTION), the placeholder --name
# (ENVIRONMENT: SCANGATE_NAME is option --name).
foreign=$'now\nname'

# check PAGE: prints what is wrong and returns 1, else returns 0.
check() {
  local page=$1 name=${1##*/} bad=0 warnings text
  # Warnings of every kind (-ww), as lintian's man check (man --warnings) sees them.
  warnings=$(LC_ALL=C.UTF-8 groff -man -Tutf8 -ww -z "$page" 2>&1) || true
  [[ -z $warnings ]] || { echo "$name: groff warns: $warnings"; bad=1; }
  # Plain text (-P-cbou: no overstrike, bold, underline), one line per paragraph (no line breaks, so no word is
  # hyphenated across lines), hyphen and minus signs as "-".
  text=$(LC_ALL=C.UTF-8 groff -man -Tutf8 -rLL=2000n -P-cbou "$page" 2>/dev/null | sed 's/\xe2\x80\x90/-/g; s/\xe2\x88\x92/-/g')
  local section
  for section in NAME SYNOPSIS DESCRIPTION OPTIONS ENVIRONMENT FILES SIGNALS "EXIT STATUS" "SEE ALSO"; do
    grep -qx "$section" <<<"$text" || { echo "$name: no section $section"; bad=1; }
  done
  # Each option documented: a tag line of OPTIONS ("       --name=value ..." at the paragraph indent).
  awk '/^OPTIONS$/ {on = 1; next} /^[A-Z]/ {on = 0} on' <<<"$text" |
    sed -n 's/^       --\([a-z0-9-]*\).*/\1/p' | sort -u > "$work/documented.txt"
  local missing extra unknown_env
  missing=$(comm -23 "$work/help.txt" "$work/documented.txt")
  [[ -z $missing ]] || { echo "$name: options of --help missing from OPTIONS:" $missing; bad=1; }
  extra=$(comm -13 "$work/help.txt" "$work/documented.txt")
  [[ -z $extra ]] || { echo "$name: OPTIONS documents options --help does not list:" $extra; bad=1; }
  # Every option named anywhere (--name, SCANGATE_NAME) exists.
  { grep -oE -- '--[a-z][a-z0-9-]*' <<<"$text" | sed 's/^--//'
    grep -oE 'SCANGATE_[A-Z0-9_]+' <<<"$text" | sed 's/^SCANGATE_//' | tr 'A-Z_' 'a-z-'
  } | sort -u | grep -vxF "$foreign" > "$work/named.txt" || true
  unknown_env=$(comm -13 "$work/help.txt" "$work/named.txt")
  [[ -z $unknown_env ]] || { echo "$name: names options that do not exist:" $unknown_env; bad=1; }
  # Every exit code of server/app.h is an item of EXIT STATUS.
  local code
  for code in 0 $(sed -n 's/^inline constexpr int kExit[A-Za-z]* = \([0-9]*\);.*/\1/p' "$src/server/app.h"); do
    awk '/^EXIT STATUS$/ {on = 1; next} /^[A-Z]/ {on = 0} on' <<<"$text" | grep -qE "^       $code( |$)" ||
      { echo "$name: exit code $code is not in EXIT STATUS"; bad=1; }
  done
  return $bad
}

generate() { "$deb/man_page.sh" "$bin" "$1" "$2"; }

# Self-check: a page without one option, a page naming an option that does not exist (as --name and as
# SCANGATE_NAME), a page groff warns about — each must fail.
generate "$deb/scangate.8.in" "$work/scangate.8"
awk '/^\.TP$|^\.SS/ {skip = 0}
     /^\.TP$/ {held = $0; next}
     held != "" { if ($0 ~ /^\\fB\\-\\-port\\-file\\fR/) {skip = 1} else {print held}; held = "" }
     !skip' "$work/scangate.8" > "$work/missing.8"
grep -q 'port\\-file\\fR' "$work/missing.8" && fail "self-check: could not remove --port-file's entry"
sed 's/^\.SH SIGNALS$/.PP\nSee \\-\\-no\\-such\\-option.\n&/' "$work/scangate.8" > "$work/unknown.8"
sed 's/^\.SH SIGNALS$/.PP\nSee\n.B SCANGATE_NO_SUCH_OPTION .\n&/' "$work/scangate.8" > "$work/unknown_env.8"
sed 's/^\.SH SIGNALS$/.XY not a macro\n&/' "$work/scangate.8" > "$work/warns.8"
for broken in missing unknown unknown_env warns; do
  if out=$(check "$work/$broken.8"); then fail "self-check: the $broken page passed"; fi
  echo "self-check ($broken): $(head -1 <<<"$out")"
done

check "$work/scangate.8" || fail "the man page (above)"
echo "OK: scangate(8) documents the $(wc -l < "$work/help.txt") options of --help, names no other, renders without warnings"
