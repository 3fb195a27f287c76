# shellcheck shell=sh
# The bad-input table: every row of /tests/bad-inputs.txt (tests/bad-inputs/table.txt in the
# repository) is tried and printed with what was expected and what happened: the outcome, how
# many lines the module logged, and, if anything was left behind (a pin, a mapping, a context,
# a module reference), what. A row passes when all of that is as expected and nothing is left.
T=/tests/bad-inputs.txt
KL=/tmp/bad-inputs.klog
M=/sys/module/nv_peer_mem
: >$KL

# GPU and GPU+OFFSET in the table are addresses in this VM's GPU memory.
addr() {
	case $1 in
	GPU) echo "$GPU_VA" ;;
	GPU+*) hex "$GPU_VA + ${1#GPU+}" ;;
	*) echo "$1" ;;
	esac
}
# The errno behind the shell's "write error: <strerror>".
errno_name() {
	case $1 in
	*"Bad address"*) echo EFAULT ;;
	*"Invalid argument"*) echo EINVAL ;;
	*"Cannot allocate memory"*) echo ENOMEM ;;
	*"not supported"* | *"Not supported"*) echo EOPNOTSUPP ;;
	*"I/O error"* | *"Input/output error"*) echo EIO ;;
	*"No such device"*) echo ENODEV ;;
	*"busy"* | *"in use"*) echo EBUSY ;;
	*) echo "error($1)" ;;
	esac
}
# write FILE LINE: $wr is "ok" or the errno's name. Everything that reaches nvidia.ko runs in
# this shell, never in a subshell: NVIDIA finds GPU memory by the calling process.
write() {
	if { echo "$2" >"$1"; } 2>/tmp/write-error; then wr=ok; else wr=$(errno_name "$(cat /tmp/write-error)"); fi
}
module_loaded() { test -d $M; }
load_module() { module_loaded || modprobe nv_peer_mem; }

# Setup commands, ";"-separated, run in this shell. Every row but a load finds the module
# loaded (loads come one after another, so the module is unloaded and loaded once for them).
run_setup() {
	case $2 in load*) ;; *) load_module || return 1 ;; esac
	[ "$1" = - ] && return 0
	old_ifs=$IFS
	IFS=';'
	set -f
	# shellcheck disable=SC2086 # split on ";" on purpose
	set -- $1
	IFS=$old_ifs
	for cmd in "$@"; do
		# shellcheck disable=SC2086
		set -- $cmd
		case $1 in
		needs) nv_has_persistent || return 2 ;;
		alloc) ctl_nv "alloc $(hex "$GPU_VA + $2") $3 contiguous" ;;
		free) ctl_nv "free $(hex "$GPU_VA + $2")" ;;
		inject) shift; ctl_nv "inject $*" ;;
		reg) ctl_ib "reg $2 $3 $(addr "$4") $5" ;;
		*) echo "setup: unknown command '$cmd'"; return 1 ;;
		esac || { set +f; return 1; }
	done
	set +f
}

# $outcome: the action's outcome, in the table's words.
act() {
	verb=$1
	shift
	case $verb in
	reg)
		write $IBC/ctl "reg $1 $2 $(addr "$3") $4"
		outcome=$wr
		;;
	call)
		c=$1 d=$2 a=$(addr "$3") l=$4
		shift 4
		ops=
		for op in "$@"; do
			case $op in
			get_pages:*)
				r=${op#get_pages:}
				op="get_pages:$(addr "${r%%:*}"):${r#*:}"
				;;
			esac
			ops="$ops $op"
		done
		write $IBC/ctl "call $c $d $a $l$ops"
		if [ "$wr" = ok ]; then outcome=$(cat $IBC/calls); else outcome="call: $wr"; fi
		;;
	bogus)
		before=$(nvpm_stat "$1" err_refused_context)
		write $IBC/ctl "bogus-context $1 $2"
		outcome="refused=$(($(nvpm_stat "$1" err_refused_context) - before))${wr#ok}"
		;;
	load)
		! module_loaded || rmmod nv_peer_mem
		# shellcheck disable=SC2068 # the parameters are words
		if modprobe nv_peer_mem $@ 2>/dev/null; then outcome=loaded; else outcome=refused; fi
		! module_loaded || rmmod nv_peer_mem
		;;
	set)
		before=$(cat $M/parameters/"$1")
		write $M/parameters/"$1" "$2"
		if [ "$wr" = ok ]; then outcome=accepted; else outcome=refused; fi
		[ "$(cat $M/parameters/"$1")" = "$before" ] || outcome="$outcome (changed to $(cat $M/parameters/"$1"))"
		;;
	rmmod)
		if rmmod nv_peer_mem 2>/dev/null; then outcome=unloaded; else outcome=refused; fi
		module_loaded || outcome="$outcome (gone)"
		;;
	*) outcome="unknown verb $verb" ;;
	esac
}

# $left: what a row left behind, or nothing. Read without a subshell (forks are slow under
# the emulator, and this runs for every row).
leftovers() {
	p='?' q='?' m='?' d='?' refs=0
	while read -r key value; do
		case $key in
		pins) p=$value ;;
		persistent_pins) q=$value ;;
		mappings) m=$value ;;
		dead_tables) d=$value ;;
		esac
	done <$NV/stats
	! module_loaded || read -r refs <$M/refcnt
	left=
	[ "$p$q$m$d$refs" = 00000 ] || left="LEFT: pins=$p persistent=$q mappings=$m dead_tables=$d refs=$refs"
}
# trim VAR: strip the blanks around the value of the variable named VAR.
trim() {
	eval "v=\$$1"
	v=${v#"${v%%[! ]*}"}
	v=${v%"${v##*[! ]}"}
	eval "$1=\$v"
}
cleanup_row() {
	ctl_nv "inject clear"
	for id in 1 2 3; do ctl_ib "dereg $id" 2>/dev/null; done
	for off in 0 0x10000 0x20000; do ctl_nv "free $(hex "$GPU_VA + $off")" 2>/dev/null; done
}

check "load" load_world
rows=0 good=0
printf '| %-55s | %-40s | %-40s |\n' input expected observed >/tmp/bad-inputs.table
while IFS='|' read -r input setup action expected; do
	case $input in '#'* | '') continue ;; esac
	trim input
	trim setup
	trim action
	trim expected
	dmesg -c >>$KL
	verb=
	run_setup "$setup" "$action"
	case $? in
	0)
		dmesg -c >>$KL # the setup's own lines do not count
		# shellcheck disable=SC2086 # the action is words
		act $action
		;;
	2)
		echo "skipped in this world: $input"
		cleanup_row
		continue
		;;
	*) outcome="setup failed" ;;
	esac
	rows=$((rows + 1))
	# The module's own lines; the kernel's parameter parser also says "nv_peer_mem: '<v>'
	# invalid for parameter '<p>'", which is not ours. Busybox's modprobe tries a failing load
	# twice (finit_module, then init_module), so a load counts each distinct line once.
	log=$(dmesg | grep 'nv_peer_mem: ' | grep -v 'invalid for parameter' | sed 's/^\[[^]]*\] *//' |
		if [ "$verb" = load ]; then sort -u; else cat; fi | wc -l)
	dmesg -c >>$KL
	cleanup_row
	leftovers
	observed="$outcome log=$log${left:+ $left}"
	printf '| %-55s | %-40s | %-40s |\n' "$input" "$expected" "$observed" >>/tmp/bad-inputs.table
	if [ "$observed" = "$expected" ]; then
		good=$((good + 1))
		ok "$input: $observed"
	else
		not_ok "$input: expected '$expected', got '$observed'"
	fi
	dmesg -c >>$KL
done <$T
cat /tmp/bad-inputs.table
echo "bad inputs: $rows tried, $good as expected"
# Every row of the table ran, but those this driver generation cannot have (no persistent API).
total=$(grep -v '^#' $T | grep -c '|')
needs=$(grep -v '^#' $T | awk -F'|' '$2 ~ /needs persistent/' | wc -l)
want=$total
nv_has_persistent || want=$((total - needs))
check "every row of the table: $want of $total in this world" test "$rows" = "$want"
load_module
expect_nv_clean
check "unload" unload_world
# The kernel log of every row, for the harness's KASAN/lockdep/kmemleak/WARN scan.
sed 's/^/KLOG: /' $KL
finish
