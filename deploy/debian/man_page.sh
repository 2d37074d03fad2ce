#!/usr/bin/env bash
# Builds the man page scangate(8): the hand-written deploy/debian/scangate.8.in with its line @OPTIONS@ replaced
# by the options of `scangate --help` — each group a .SS, each option a .TP with its argument, its text and its
# default — and @VERSION@ by the binary's version. The OPTIONS section is the binary's own, so it cannot drift;
# ctest man_page (tests/debian/man_page_test.sh) checks the page as rendered. Fails on a --help line it does not
# understand rather than dropping an option.
# Usage: man_page.sh <scangate binary> <scangate.8.in> <output scangate.8>
set -euo pipefail
bin=$1 in=$2 out=$3

help=$("$bin" --help)
version=$("$bin" --version | awk '{print $2; exit}')
[[ -n $version ]] || { echo "man_page.sh: no version from $bin --version" >&2; exit 1; }

# Boost.Program_options' layout: a caption line "Group:" per group, "  --name arg (=default)" then the text in a
# column (on the next line when the name is too wide), continuation lines indented to that column.
options=$(awk '
  function esc(s) {
    gsub(/\\/, "\\e", s); gsub(/-/, "\\-", s)
    if (s ~ /^[.\047]/) s = "\\&" s
    return s
  }
  function flush() {
    if (name == "") return
    text = esc(text)
    if (def != "") text = text " (default: " esc(def) ")"
    printf ".TP\n%s\n%s\n", head, text
    name = ""; n++
  }
  NR <= 2 && !/^ / { next }                                   # the version line and the usage line
  /^$/ { next }
  /^[^ ].*:$/ {                                               # a group caption
    flush()
    if ($0 !~ /^Options /) { sub(/:$/, ""); printf ".SS %s\n", $0 }
    next
  }
  /^  --[a-z0-9-]+/ {
    flush()
    line = $0; sub(/^  /, "", line)
    spec = line; rest = ""
    if (match(line, /  +/)) { spec = substr(line, 1, RSTART - 1); rest = substr(line, RSTART + RLENGTH) }
    name = spec; sub(/ .*/, "", name); sub(/^--/, "", name)
    arg = substr(spec, length(name) + 3)
    def = ""; head = "\\fB" esc("--" name) "\\fR"
    if (match(arg, /^ \[=arg\(=[^)]*\)\]/)) {                  # an implicit value: --insecure[=VALUE]
      head = head "[=\\fIvalue\\fR]"; arg = substr(arg, RLENGTH + 1)
    } else if (arg ~ /^ arg/) {
      head = head "=\\fIvalue\\fR"; arg = substr(arg, 5)
    }
    if (match(arg, /^ \(=.*\)$/)) { def = substr(arg, 4, RLENGTH - 4); arg = "" }
    if (arg != "") { printf "man_page.sh: cannot read the option line: %s\n", $0 > "/dev/stderr"; bad = 1 }
    text = rest; sub(/ +$/, "", text)
    next
  }
  /^      / && name != "" {                                   # the text, continued
    line = $0; sub(/^ +/, "", line); sub(/ +$/, "", text)
    text = (text == "" ? line : text " " line)
    next
  }
  { printf "man_page.sh: unexpected --help line %d: %s\n", NR, $0 > "/dev/stderr"; bad = 1 }
  END {
    flush()
    if (n == 0) { print "man_page.sh: no options in --help" > "/dev/stderr"; bad = 1 }
    exit bad
  }
' <<<"$help")

tmp=$out.tmp
# The values through the environment: awk -v would read the roff escapes (\f) as its own.
MAN_OPTIONS=$options MAN_VERSION=$version awk '
  $0 == "@OPTIONS@" { print ENVIRON["MAN_OPTIONS"]; found = 1; next }
  { gsub(/@VERSION@/, ENVIRON["MAN_VERSION"]); print }
  END { if (!found) { print "man_page.sh: no @OPTIONS@ line in the source" > "/dev/stderr"; exit 1 } }
' "$in" > "$tmp"
mv "$tmp" "$out"
