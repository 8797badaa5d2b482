#!/bin/sh
# Integration area "sample": joint samples: shape and seeds
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).

section "sample"
need_sine
check_json "sample" 200 /v1/models/sine/sample "{\"X\":$SINE_X,\"n_samples\":5,\"seed\":7}"
cp "$T/body" "$T/sample7.json"
jmat samples >"$T/samples.txt"
awk -F, '{ if (NF != 4) bad = 1; n++ } END { exit bad || n != 5 }' "$T/samples.txt"
verdict "samples: 5 draws of 4 points" $? "shape $(count_lines <"$T/samples.txt") rows"
check_json "sample again, same seed" 200 /v1/models/sine/sample "{\"X\":$SINE_X,\"n_samples\":5,\"seed\":7}"
cmp -s "$T/body" "$T/sample7.json"
verdict "same seed -> identical body" $? "bodies differ"
check_json "sample, another seed" 200 /v1/models/sine/sample "{\"X\":$SINE_X,\"n_samples\":5,\"seed\":8}"
! cmp -s "$T/body" "$T/sample7.json"
verdict "different seed -> different samples" $? "bodies are identical"
