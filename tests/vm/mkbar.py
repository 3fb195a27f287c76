#!/usr/bin/env python3
"""Make a "GPU memory" BAR image and the SHA-256 of each of its 4 KiB chunks.

The image is pseudo-random from a fixed seed, so the checksum list shipped in the initramfs
matches every fresh copy of the image: tests compare data the NIC DMA-read inside the VM with
what the host wrote into the BAR before boot.
"""
import hashlib
import random
import sys

CHUNK = 4096


def main() -> None:
    if len(sys.argv) != 5:
        sys.exit("usage: mkbar.py SEED SIZE_MIB IMAGE SHA_LIST")
    seed, mib, image, sums = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    data = random.Random(seed).randbytes(mib << 20)
    with open(image, "wb") as f:
        f.write(data)
    with open(sums, "w") as f:
        for off in range(0, len(data), CHUNK):
            f.write(hashlib.sha256(data[off:off + CHUNK]).hexdigest() + "\n")


if __name__ == "__main__":
    main()
