"""A stored body as the producer sent it: the one rule for inflating a compressed body.

RocketMQ clients compress a body over ``compressMsgBodyOverHowmuch`` (4 KiB) and set the SYSFLAG's
compressed bit (``MessageSysFlag.COMPRESSED_FLAG``, 0x1); the broker stores the compressed bytes
(BODYCRC is of them). 4.9's clients deflate with zlib (``UtilAll.compress``). 5.x's also say which
compressor in bits 8-10 (``MessageSysFlag.COMPRESSION_TYPE_COMPARATOR``; ``CompressionType``):
1 LZ4 (an LZ4 frame), 2 ZSTD (a zstd frame), 3 ZLIB, and 0 is ZLIB too (a 4.9 client's record).
"""
from __future__ import annotations

import zlib

from rocketlake.store.codec import FLAG_COMPRESSED
from rocketlake.store.errors import CorruptRecordError

#: SYSFLAG bits 8-10: 5.x's compression type (``MessageSysFlag.COMPRESSION_TYPE_COMPARATOR``)
COMPRESSION_TYPE_MASK = 0x700
COMPRESSION_LZ4 = 0x100
COMPRESSION_ZSTD = 0x200
COMPRESSION_ZLIB = 0x300
#: the compressor of each compression type RocketMQ knows (``CompressionType.findByValue``)
COMPRESSION_NAMES = {0: "zlib", COMPRESSION_LZ4: "lz4", COMPRESSION_ZSTD: "zstd",
                     COMPRESSION_ZLIB: "zlib"}


def is_compressed(sys_flag: int) -> bool:
    """Whether a record's body is stored compressed (the SYSFLAG's compressed bit)."""
    return bool(sys_flag & FLAG_COMPRESSED)


def inflate(body: bytes, sys_flag: int, offset: int) -> bytes:
    """The body the producer sent: ``body`` itself when ``sys_flag`` has no compressed bit, else
    ``body`` decompressed by the compressor the SYSFLAG names. CorruptRecordError naming the
    CommitLog ``offset`` of the record for a compression type RocketMQ does not know or a body
    its compressor cannot read."""
    if not is_compressed(sys_flag):
        return body
    kind = sys_flag & COMPRESSION_TYPE_MASK
    name = COMPRESSION_NAMES.get(kind)
    if name is None:
        raise CorruptRecordError(
            f"commitlog offset {offset}: SYSFLAG {sys_flag:#x} names compression type {kind >> 8}, "
            f"which RocketMQ does not know (1 lz4, 2 zstd, 3 or 0 zlib): the body cannot be inflated")
    try:
        return _DECOMPRESS[name](body)
    except Exception as e:  # each library has its own error class (zlib.error, RuntimeError, ZstdError)
        raise CorruptRecordError(f"commitlog offset {offset}: the {name}-compressed body "
                                 f"({len(body)} bytes) cannot be inflated: {e}") from e


def _zlib(body: bytes) -> bytes:
    """A zlib stream (``java.util.zip.Deflater``): what 4.9's ``UtilAll.uncompress`` reads."""
    return zlib.decompress(body)


def _lz4(body: bytes) -> bytes:
    """One LZ4 frame (``LZ4FrameOutputStream``), whole."""
    import lz4.frame  # imported when a body needs it: most stores have none

    d = lz4.frame.LZ4FrameDecompressor()
    out: bytes = d.decompress(body)
    if not d.eof:
        raise ValueError("the LZ4 frame ends early")
    return out


def _zstd(body: bytes) -> bytes:
    """One zstd frame (``ZstdOutputStream``: no content size in its header), whole."""
    import zstandard  # imported when a body needs it: most stores have none

    d = zstandard.ZstdDecompressor().decompressobj()
    out: bytes = d.decompress(body)
    if not d.eof:
        raise ValueError("the zstd frame ends early")
    return out


_DECOMPRESS = {"zlib": _zlib, "lz4": _lz4, "zstd": _zstd}
