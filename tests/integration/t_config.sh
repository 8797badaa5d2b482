#!/bin/sh
# Integration area "config": the README configuration table against --help
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).

section "README configuration table"
# Every flag of `gpserve --help` is in the README's configuration table, with
# its environment variable, and the table names no flag the daemon lacks.
"$BIN" --help >"$T/help.txt" 2>&1
sed -n 's/^[[:space:]]*\(--[a-z][a-z0-9-]*\).*/\1/p' "$T/help.txt" | grep -v -- '^--help$' | sort -u >"$T/help.flags"
sed -n '/^### Configuration/,/^## /p' README.md | grep '^| `--' >"$T/readme.table"
sed 's/^| `\(--[a-z0-9-]*\).*/\1/' "$T/readme.table" | sort -u >"$T/readme.flags"
if [ -s "$T/help.flags" ] && cmp -s "$T/help.flags" "$T/readme.flags"; then
    pass "README configuration table has exactly the flags of --help ($(count_lines <"$T/help.flags"))"
else
    fail "README configuration table has exactly the flags of --help" \
        "only in --help: $(comm -23 "$T/help.flags" "$T/readme.flags" | tr '\n' ' ')only in README: $(comm -13 "$T/help.flags" "$T/readme.flags" | tr '\n' ' ')"
fi
bad=""
baddef=""
while read -r f; do
    env=$(grep -A1 -- "^ *$f " "$T/help.txt" | grep -o 'GPSERVE_[A-Z_]*' | head -n 1)
    dflt=$(grep -A1 -- "^ *$f " "$T/help.txt" | sed -n 's/.*default \([^ ,]*\).*/\1/p' | head -n 1)
    rrow=$(grep -- "^| \`$f[ \`]" "$T/readme.table")
    printf '%s\n' "$rrow" | grep -q "\`$env\`" || bad="$bad $f/$env"
    case $dflt in
    none) printf '%s\n' "$rrow" | grep -q '| none |' || baddef="$baddef $f=none" ;;
    *) printf '%s\n' "$rrow" | awk -F'|' -v d="\`$dflt\`" 'index($4, d) == 0 { exit 1 }' || baddef="$baddef $f=$dflt" ;;
    esac
done <"$T/help.flags"
[ -z "$bad" ]
verdict "README table: each flag's environment variable as in --help" $? "mismatch:$bad"
[ -z "$baddef" ]
verdict "README table: each flag's default as in --help" $? "--help says:$baddef"

finish
