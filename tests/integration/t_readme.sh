#!/bin/sh
# Integration area "readme": every curl example of README.md, with the status it names
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).

section "README examples"
# The fenced ```sh blocks between <!-- examples:begin --> and <!-- examples:end -->
# run in order in one subshell, with localhost:8080 replaced by the daemon's
# address and curl wrapped so that each call's status is logged; each call must
# get the status its "# -> NNN" comment names.
run_readme_examples() {
    awk '/<!-- examples:begin -->/ { on = 1; next }
         /<!-- examples:end -->/   { on = 0 }
         on && /^```sh[[:space:]]*$/ { inb = 1; next }
         on && inb && /^```/ { inb = 0; next }
         on && inb { print }' README.md >"$T/examples.sh"
    if [ ! -s "$T/examples.sh" ]; then
        fail "README examples" "no \`\`\`sh block between the examples markers in README.md"
        return
    fi
    grep -o '# -> [0-9][0-9][0-9]' "$T/examples.sh" | sed 's/# -> //' >"$T/ex.expected"
    concrete=$CONCRETE
    if [ -z "$concrete" ]; then
        concrete=$T/concrete_standin.csv
        {
            # concrete.csv's header: the README predicts by these names
            echo "cement,blast_furnace_slag,fly_ash,water,superplasticizer,coarse_aggregate,fine_aggregate,age_days,y"
            gen_xy 60 8 21
        } >"$concrete"
    fi
    sed -e "s#localhost:8080#127.0.0.1:$PORT#g" \
        -e "s#@\.\./shared/datasets/concrete\.csv#@$concrete#g" "$T/examples.sh" >"$T/ex.run.sh"
    : >"$T/ex.log"
    (
        curl() {
            rm -f "$T/ex.hdr"
            command curl --max-time "$MT" -D "$T/ex.hdr" "$@"
            _rc=$?
            _st=$(tr -d '\r' <"$T/ex.hdr" 2>/dev/null | sed -n 's/^HTTP\/[0-9.]* \([0-9][0-9][0-9]\).*/\1/p' | tail -n 1)
            _u=""
            _v=GET
            for _a in "$@"; do
                case $_a in *127.0.0.1:*) _u=${_a#*127.0.0.1:"$PORT"} ;; esac
                case $_a in -d | --data* | -d*) [ "$_v" = GET ] && _v=POST ;; DELETE) _v=DELETE ;; esac
            done
            echo "${_st:-000} $_v $_u (curl exit $_rc)" >>"$T/ex.log"
            return $_rc
        }
        . "$T/ex.run.sh"
    ) >"$T/ex.out" 2>&1
    nexp=$(count_lines <"$T/ex.expected")
    ngot=$(count_lines <"$T/ex.log")
    if [ "$nexp" -ne "$ngot" ]; then
        fail "README examples: $nexp '# -> STATUS' comments, $ngot curl calls made" "output:"
        sed 's/^/     | /' "$T/ex.out" | head -n 20
    fi
    i=1
    while [ $i -le "$ngot" ]; do
        got=$(sed -n "${i}p" "$T/ex.log")
        exp=$(sed -n "${i}p" "$T/ex.expected")
        st=${got%% *}
        what=${got#* }
        if [ "$st" = "$exp" ]; then
            pass "README example $i: ${what% (curl exit*} -> $exp"
        else
            fail "README example $i: ${what% (curl exit*}" "status $st, expected ${exp:-none} (${what##*(}"
        fi
        i=$((i + 1))
    done
}
run_readme_examples
