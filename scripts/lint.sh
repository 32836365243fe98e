#!/usr/bin/env bash
# Static checks of the C++ sources:
#   scripts/lint.sh            formatting (.clang-format) of every tracked .cc/.h but those
#                              listed in scripts/format-pending.txt (written before the check;
#                              the list only shrinks); the first tier runs this, so a change
#                              that is not formatted does not land
#   scripts/lint.sh --fix [FILES]  formats FILES (default: every source) in place
#   scripts/lint.sh --tidy [FILES]  clang-tidy (.clang-tidy) over FILES, or every library
#                              source, with build/compile_commands.json (a configured build)
set -euo pipefail
cd "$(dirname "$0")/.."

format=$(command -v clang-format-14 || command -v clang-format || true)
mapfile -t sources < <(git ls-files 'src/*.cc' 'src/*.h' 'fuzz/*.cc' 'fuzz/*.h')

case "${1:-}" in
  --fix)
    shift
    if [[ $# -gt 0 ]]; then "$format" -i "$@"; else "$format" -i "${sources[@]}"; fi
    ;;
  --tidy)
    shift
    [[ -f build/compile_commands.json ]] || { echo "lint: configure a build first (cmake --preset default)" >&2; exit 2; }
    if [[ $# -eq 0 ]]; then mapfile -t files < <(git ls-files 'src/*.cc' | grep -v '_test\.cc$'); else files=("$@"); fi
    clang-tidy -p build --quiet "${files[@]}"
    ;;
  "")
    [[ -n $format ]] || { echo "lint: clang-format not found (scripts/setup.sh installs it)" >&2; exit 2; }
    declare -A pending=()
    while read -r f; do [[ -n $f && $f != \#* ]] && pending[$f]=1; done < scripts/format-pending.txt
    bad=()
    done_pending=()
    # One clang-format run for all: the files it finds unformatted are named in its warnings.
    declare -A unformatted=()
    while read -r f; do unformatted[$f]=1; done < <("$format" --dry-run "${sources[@]}" 2>&1 |
                                                       sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: warning: code should be clang-formatted.*/\1/p' | sort -u)
    for f in "${sources[@]}"; do
      if [[ -z ${unformatted[$f]:-} ]]; then
        [[ -n ${pending[$f]:-} ]] && done_pending+=("$f")
      elif [[ -z ${pending[$f]:-} ]]; then
        bad+=("$f")
      fi
    done
    if [[ ${#done_pending[@]} -gt 0 ]]; then
      printf 'lint: formatted now, take out of scripts/format-pending.txt: %s\n' "${done_pending[*]}" >&2
    fi
    if [[ ${#bad[@]} -gt 0 ]]; then
      printf 'lint: %d file(s) not formatted as .clang-format says (scripts/lint.sh --fix):\n' "${#bad[@]}" >&2
      printf '  %s\n' "${bad[@]}" >&2
      exit 1
    fi
    printf 'lint: %d files checked, %d formatted, %d written before the check still pending\n' \
      "${#sources[@]}" "$((${#sources[@]} - ${#pending[@]}))" "${#pending[@]}" >&2
    ;;
  *) echo "usage: scripts/lint.sh [--fix | --tidy [FILES]]" >&2; exit 2 ;;
esac
