#!/bin/sh
# No import circle inside a layer, checked at link level on the built
# objects: within a layer, file A depends on file B when A's object uses a
# symbol that B's object defines (nm), and those dependencies must point one
# way (tsort finds no loop). Includes can hide a circle (a header declares
# what any file defines); the linker's view cannot.
#   - a module is one object, named by its source (api/predict, core/model/model);
#   - only global definitions count: a static function or variable is
#     resolved inside its own object, so its users are that object alone, and
#     a static of the same name as another file's global makes no edge;
#   - generated objects (BUILD/obj/gen/L/...) count as layer L (the OpenAPI
#     document and the browser assets are api/);
#   - an object whose source is gone (left in BUILD by a rename) is skipped.
# Usage: sh mk/check_cycles.sh [BUILD [LAYER...]]  (default: build, core store api server)
#        sh mk/check_cycles.sh --self-test        (injected circles must fail)
# Prints each loop's members as "check-cycles: L: loop: a b ..." and exits 1
# when there is any; exit 2 when a layer has no objects (build it first).
set -u
LC_ALL=C
export LC_ALL

# The objects of layer $2 in build dir $1, one "module<TAB>object" a line.
layer_objects() {
    b=$1
    l=$2
    find "$b/obj/$l" -name '*.o' 2>/dev/null | sort | while read -r o; do
        m=${o#"$b"/obj/}
        m=${m%.o}
        [ -f "$SRC_ROOT/$m.c" ] && printf '%s\t%s\n' "$m" "$o"
    done
    find "$b/obj/gen/$l" -name '*.o' 2>/dev/null | sort | while read -r o; do
        m=${o#"$b"/obj/}
        m=${m%.o}
        [ -f "$b/$m.c" ] && printf '%s\t%s\n' "$m" "$o"
    done
}

# "user definer" for every symbol a module uses that another module of the
# layer defines (objects listed in file $1).
layer_graph() {
    : >"$tmp/defs"
    : >"$tmp/uses"
    # one nm call a layer (nm -A names each line's object): "object:value
    # type symbol" for definitions, "object:  U symbol" for uses; the object
    # is mapped back to its module through the list in $1
    cut -f2 "$1" >"$tmp/objlist"
    awk -F '\t' '{ print $2 "\t" $1 }' "$1" >"$tmp/obj2mod"
    # global definitions only (nm -g): locals never leave their object
    xargs nm -A -g --defined-only <"$tmp/objlist" 2>/dev/null |
        awk -F '\t' 'NR == FNR { mod[$1] = $2; next }
            { i = index($0, ".o:"); o = substr($0, 1, i + 1); n = split(substr($0, i + 3), w, " ");
              if (n == 3 && (o in mod)) print w[3], mod[o] }' "$tmp/obj2mod" - >"$tmp/defs"
    xargs nm -A -u <"$tmp/objlist" 2>/dev/null |
        awk -F '\t' 'NR == FNR { mod[$1] = $2; next }
            { i = index($0, ".o:"); o = substr($0, 1, i + 1); n = split(substr($0, i + 3), w, " ");
              if (o in mod) print w[n], mod[o] }' "$tmp/obj2mod" - >"$tmp/uses"
    sort -k1,1 "$tmp/defs" >"$tmp/defs.s"
    sort -k1,1 "$tmp/uses" >"$tmp/uses.s"
    join "$tmp/uses.s" "$tmp/defs.s" | awk '$2 != $3 { print $2, $3 }' | sort -u
}

# Check layers $2... of build dir $1; print every loop.
check() {
    b=$1
    shift
    bad=0
    for l in "$@"; do
        layer_objects "$b" "$l" >"$tmp/objs"
        if [ ! -s "$tmp/objs" ]; then
            echo "check-cycles: $l: no objects in $b/obj/$l (build the layer first)"
            [ "$bad" -eq 0 ] && bad=2
            continue
        fi
        layer_graph "$tmp/objs" >"$tmp/graph"
        # tsort names the members of each loop it breaks, one per line after
        # "input contains a loop:"; a module with no edge is no line at all
        tsort "$tmp/graph" 2>&1 >/dev/null | awk -v l="$l" '
            /input contains a loop/ { if (n) print "check-cycles: " l ": loop:" loop; loop = ""; n = 1; next }
            { sub(/^tsort: /, ""); loop = loop " " $0 }
            END { if (n) print "check-cycles: " l ": loop:" loop }' >"$tmp/loops"
        if [ -s "$tmp/loops" ]; then
            cat "$tmp/loops"
            bad=1
        else
            echo "check-cycles: $l: ok ($(wc -l <"$tmp/objs") files, $(wc -l <"$tmp/graph") dependencies, one way)"
        fi
    done
    return $bad
}

# Tiny objects in a scratch build dir: each case must fail (or, for the
# last ones, pass), so that every rule of the check can fail.
self_test() {
    failures=0
    CC=${CC:-cc}
    scratch=$tmp/self
    # obj NAME 'C source': compile into $scratch/obj/NAME.o, with NAME.c as its source
    obj() {
        mkdir -p "$(dirname "$scratch/src/$1")" "$(dirname "$scratch/obj/$1")"
        printf '%s\n' "$2" >"$scratch/src/$1.c"
        $CC -std=c11 -O0 -c "$scratch/src/$1.c" -o "$scratch/obj/$1.o" || exit 2
    }
    # gen NAME 'C source': a generated object, source in $scratch/gen/NAME.c
    gen() {
        mkdir -p "$(dirname "$scratch/gen/$1")" "$(dirname "$scratch/obj/gen/$1")"
        printf '%s\n' "$2" >"$scratch/gen/$1.c"
        $CC -std=c11 -O0 -c "$scratch/gen/$1.c" -o "$scratch/obj/gen/$1.o" || exit 2
    }
    fresh() { rm -rf "$scratch" && mkdir -p "$scratch/obj"; }
    expect() { # pass|fail, description, layer
        out=$(SRC_ROOT=$scratch/src check "$scratch" "$3")
        rc=$?
        case $1 in
        fail) [ "$rc" -eq 1 ] || { echo "check-cycles self-test: '$2' was not caught"; failures=$((failures + 1)); } ;;
        pass) [ "$rc" -eq 0 ] || { echo "check-cycles self-test: '$2' fails: $out"; failures=$((failures + 1)); } ;;
        esac
        [ "$1" = fail ] && [ "$rc" -eq 1 ] && ! printf '%s\n' "$out" | grep -q "loop:.*$4" &&
            { echo "check-cycles self-test: '$2' does not name $4"; failures=$((failures + 1)); }
        return 0
    }
    fresh
    obj api/a 'int gp_b(void); int gp_a(void) { return gp_b(); }'
    obj api/b 'int gp_a(void); int gp_b(void) { return 1; } int gp_c(void) { return gp_a(); }'
    expect fail "two files using each other" api "api/a"
    fresh
    obj store/a 'int gp_b(void); int gp_a(void) { return gp_b(); }'
    obj store/b 'int gp_c(void); int gp_b(void) { return gp_c(); }'
    obj store/c 'int gp_a(void); int gp_c(void) { return gp_a(); }'
    obj store/d 'int gp_a(void); int gp_d(void) { return gp_a(); }'
    expect fail "a circle of three" store "store/c"
    fresh
    obj core/model/model 'int gp_m(void); int gp_model(void) { return gp_m(); }'
    obj core/model/method 'int gp_model(void); int gp_m(void) { return 0; } int gp_x(void) { return gp_model(); }'
    expect fail "a circle between files of a core folder" core "core/model/method"
    fresh
    obj api/a 'int gp_g(void); int gp_a(void) { return gp_g(); }'
    gen api/g 'int gp_a(void); int gp_g(void) { return 0; } int gp_h(void) { return gp_a(); }'
    expect fail "a circle through a generated object (gen/api counts as api)" api "gen/api/g"
    fresh
    # b has a static gp_s of its own; what a uses is c's global gp_s
    obj server/a 'int gp_s(void); int gp_a(void) { return gp_s(); }'
    obj server/b 'int gp_a(void); static int gp_s(void) { return 2; } int gp_b(void) { return gp_a() + gp_s(); }'
    obj server/c 'int gp_s(void) { return 1; }'
    expect pass "a static function named like another file's global (no circle)" server
    fresh
    obj api/a 'int gp_b(void); int gp_a(void) { return gp_b(); }'
    obj api/b 'int gp_b(void) { return 1; }'
    obj api/c 'int gp_a(void); int gp_b(void); int gp_c(void) { return gp_a() + gp_b(); }'
    # a stale object whose source is gone: a second gp_b that uses gp_a
    obj api/old 'int gp_a(void); int gp_b(void) { return gp_a(); }'
    rm -f "$scratch/src/api/old.c"
    expect pass "dependencies one way (and a stale object skipped)" api
    [ "$failures" -eq 0 ] && echo "check-cycles self-test: 4 circles caught, 2 one-way graphs pass"
    return "$failures"
}

cd "$(dirname "$0")/.." || exit 2
SRC_ROOT=$(pwd)
# Scratch files live in the build dir the check reads, not in the shared
# /tmp: a check once lost its files mid-run there (another process's
# clean-up), reporting "cannot open .../graph" for a sound tree.
case "${1:-}" in
--self-test) scratch_parent=${TMPDIR:-/tmp} ;;
*) scratch_parent=${1:-build} ;;
esac
tmp=$(mktemp -d "$scratch_parent/.check-cycles.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT INT TERM
if [ "${1:-}" = --self-test ]; then
    self_test
    exit $?
fi
build=${1:-build}
[ $# -gt 0 ] && shift
[ $# -eq 0 ] && set -- core store api server
check "$build" "$@"
