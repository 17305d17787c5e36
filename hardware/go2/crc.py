"""The CRC of LowCmd_ (and LowState_).

Every LowCmd carries `crc` = CRC-32 (polynomial 0x04C11DB7, initial value 0xFFFFFFFF, bits
taken most significant first, no reflection, no final XOR) over the message laid out as the C
struct of the same IDL on a little-endian machine (natural alignment, padding bytes zero), read
as little-endian 32-bit words, all but the last (the CRC itself):

    words = unpack("<N I", c_struct_bytes)[: N - 1],   N = sizeof(LowCmd_) / 4 = 812 / 4

`codec.c_bytes` lays the message out (LowCmd_ 812 bytes, LowState_ 1180), `crc32_words`
computes the CRC through zlib: the same polynomial run reflected equals ours on bit-reversed
bytes, bit-reversed back (`tests/hardware/test_go2_dds.py` checks it against a bit-by-bit
implementation of the definition and against a value from Unitree's own library).
"""

import zlib

import numpy as np

from .codec import c_bytes

_REVERSE_BITS = bytes(int(f"{i:08b}"[::-1], 2) for i in range(256))


def crc32_words(data: bytes) -> int:
    """CRC-32, polynomial 0x04C11DB7, initial 0xFFFFFFFF, no reflection, no final XOR, of
    `data` read as little-endian 32-bit words, each fed most significant bit first.

    Feeding a word MSB first is feeding its big-endian bytes MSB first. zlib's CRC-32 is the
    same polynomial run LSB first (reflected) with a final XOR: on bit-reversed bytes it runs
    our register bit-reversed, so ours is `reverse32(zlib.crc32(reverse8(bytes)) ^ ~0)`."""
    if len(data) % 4:
        raise ValueError(f"{len(data)} bytes is not a whole number of 32-bit words")
    big_endian = np.frombuffer(data, dtype="<u4").astype(">u4").tobytes()
    register = zlib.crc32(big_endian.translate(_REVERSE_BITS)) ^ 0xFFFFFFFF
    return int(f"{register:032b}"[::-1], 2)


def message_crc(sample) -> int:
    """The CRC of a LowCmd_ (or LowState_): `crc32_words` of its C struct without the last
    word (the `crc` field)."""
    return crc32_words(c_bytes(sample)[:-4])


def set_crc(sample):
    """Set `sample.crc` to `message_crc(sample)` (the last field set before a write)."""
    sample.crc = message_crc(sample)
    return sample


def crc_ok(sample) -> bool:
    return int(sample.crc) == message_crc(sample)
