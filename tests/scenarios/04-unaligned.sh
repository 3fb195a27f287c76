# shellcheck shell=sh
# ibv_reg_mr ranges that start and end inside GPU pages: the client widens them to 64 KiB and
# the NIC still reads the right bytes at both ends.
check "load" load_world
check "cudaMalloc 512 KiB (fragmented)" ctl_nv "alloc $GPU_VA 0x80000 fragmented"
addr=$(hex "$GPU_VA + 0x13000")
len=$((0x80000 - 0x13000 - 0x5800))
check "register [+0x13000, end-0x5800)" ctl_ib "reg 7 edu1 $addr $len"
check "widened to 7 GPU pages" grep -q "id=7 .*sg_bytes=0x70000 " $IBC/regs
dma_check 7 0 "$addr"
dma_check 7 0xd000 "$addr + 0xd000"
last=$(((len - 4096) & ~0xfff)) # the last whole 4 KiB chunk
dma_check 7 $last "$addr + $last"
check "deregister" ctl_ib "dereg 7"
check "tiny registration: 1 byte" ctl_ib "reg 8 edu0 $(hex "$GPU_VA + 0x7ffff") 1"
check "  one GPU page" grep -q "id=8 .*nents=1 sg_bytes=0x10000 " $IBC/regs
check "  deregister" ctl_ib "dereg 8"
expect_write_error "Bad address" "range running past the buffer is not GPU memory" $IBC/ctl \
	"reg 9 edu0 $(hex "$GPU_VA + 0x70000") 0x20000"
expect_nv_clean
check "unload" unload_world
finish
