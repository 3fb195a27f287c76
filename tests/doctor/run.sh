#!/bin/bash
# Runs nv_peer_mem-doctor against the fake roots described in cases/*.json and compares its
# findings with cases/<name>.expected and its exit status with the case's "exit".
#
# usage: tests/doctor/run.sh [CASE...]     (default: every case)
#   PYTHON=python3.6 ...  runs the doctor with another interpreter
#   UPDATE=1 ...          rewrites the .expected files from the doctor's output (review them!)
# Prints "PASS doctor:<case>" or "FAIL doctor:<case>: <why>" per case, plus doctor:json-keys;
# exits 1 when any case failed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
doctor=$here/../../scripts/nv_peer_mem-doctor
python=${PYTHON:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0

fail() { # fail CASE WHY
	echo "FAIL doctor:$1: $2"
	failed=1
}

# run_case NAME: build the tree, run the doctor, compare.
run_case() {
	local name=$1 json=$here/cases/$1.json expected=$here/cases/$1.expected
	local tree=$work/$1 want got line
	if ! python3 "$here/mktree.py" "$json" "$tree" 2>"$work/$name.err"; then
		fail "$name" "mktree.py: $(tail -n 1 "$work/$name.err")"
		return
	fi
	want=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["exit"])' "$json")
	"$python" "$doctor" --root "$tree" --kernel-log "$tree/kernel.log" >"$work/$name.out" 2>&1
	got=$?
	if [ "${UPDATE:-}" = 1 ]; then
		cp "$work/$name.out" "$expected"
	fi
	if ! [ -f "$expected" ]; then
		fail "$name" "no $name.expected"
	elif ! cmp -s "$expected" "$work/$name.out"; then
		line=$(cmp "$expected" "$work/$name.out" 2>&1 | sed -n 's/.* line \([0-9]*\).*/\1/p')
		line=${line:-1}
		fail "$name" "line $line: expected '$(sed -n "${line}p" "$expected")', got '$(sed -n "${line}p" "$work/$name.out")'"
	elif [ "$got" != "$want" ]; then
		fail "$name" "exit status $got, expected $want"
	else
		echo "PASS doctor:$name"
	fi
}

# The --json output of the good-pix tree parses, has every key, and agrees with the text output.
json_keys() {
	local tree=$work/json-keys
	python3 "$here/mktree.py" "$here/cases/good-pix.json" "$tree" || { fail json-keys "mktree.py failed"; return; }
	"$python" "$doctor" --json --root "$tree" --kernel-log "$tree/kernel.log" >"$work/json.out"
	local status=$?
	"$python" "$doctor" --root "$tree" --kernel-log "$tree/kernel.log" >"$work/json.txt"
	if why=$(python3 - "$work/json.out" "$work/json.txt" "$status" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1], encoding="utf-8"))
lines = open(sys.argv[2], encoding="utf-8").read().splitlines()
assert set(doc) == {"gpudirect_rdma", "findings", "pairs"}, sorted(doc)
assert doc["gpudirect_rdma"] is (sys.argv[3] == "0"), "gpudirect_rdma vs exit status"
assert len(doc["findings"]) == len(lines), "%d findings, %d text lines" % (len(doc["findings"]), len(lines))
for f, line in zip(doc["findings"], lines):
    assert set(f) == {"level", "check", "subject", "message", "fix"}, sorted(f)
    assert line.startswith("%s %s: %s" % (f["level"], f["check"], f["message"])), line
assert doc["pairs"] and all(set(p) == {"gpu", "nic", "nic_name", "relation"} for p in doc["pairs"])
assert [p["relation"] for p in doc["pairs"]] == ["PIX", "PIX"], doc["pairs"]
EOF
	) 2>&1; then
		echo "PASS doctor:json-keys"
	else
		fail json-keys "$(echo "$why" | tail -n 1)"
	fi
}

if [ $# -eq 0 ]; then
	set -- "$here"/cases/*.json
	set -- "${@##*/}"
	set -- "${@%.json}"
	json_keys
fi
for name in "$@"; do
	run_case "$name"
done
exit $failed
