"""The CommitLog record layout and the properties string, defined once (docs/FORMAT.md §2-§3).

Plain ints and strings, imported by ``codec`` and by the compiled kernels (numba reads
module-level ints as constants), so nothing here may import from the store.

A record, big-endian, as RocketMQ 4.9's ``CommitLog`` writes it. Offsets are from the record's
first byte; from BORNHOST on they move by 12 for each IPv6 host (SYSFLAG bits 0x10 and 0x20):

    offset  size  field
    ------  ----  ---------------------------------------------------------------
         0     4  TOTALSIZE        the whole record, these 4 bytes included
         4     4  MAGIC            MAGIC_V1 (TOPICLEN 1 byte) or MAGIC_V2 (2 bytes)
         8     4  BODYCRC          CRC-32 of the body & 0x7FFFFFFF
        12     4  QUEUEID
        16     4  FLAG             the producer's int flag
        20     8  QUEUEOFFSET      position in its ConsumeQueue
        28     8  PHYSICALOFFSET   this record's own CommitLog offset
        36     4  SYSFLAG          transaction type, compression, IPv6 host bits
        40     8  BORNTIMESTAMP
        48   4|16 BORNHOST         address bytes
         +     4  BORNPORT
         +     8  STORETIMESTAMP
         +   4|16 STOREHOST        address bytes
         +     4  STOREPORT
         +     4  RECONSUMETIMES
         +     8  PREPAREDTRANSACTIONOFFSET
         +     4  BODYLEN
         +     n  BODY
         +   1|2  TOPICLEN         v1: a signed byte, v2: a short
         +     n  TOPIC            UTF-8
         +     2  PROPLEN
         +     n  PROPERTIES       name\\x01value pairs joined by \\x02 (below)

With IPv4 hosts, magic v1 and empty body, topic and properties a record is ``MIN_RECORD_SIZE``
(91) bytes. A file's unused tail starts with a BLANK record: TOTALSIZE, then ``BLANK_MAGIC``.
"""
from __future__ import annotations

# --- magic codes, as the signed ints Java writes ------------------------------------------------
MAGIC_V1 = 0xDAA320A7 - (1 << 32)
MAGIC_V2 = 0xDAA320AB - (1 << 32)
BLANK_MAGIC = 0xCBD43194 - (1 << 32)

# --- SYSFLAG host bits: the host is IPv6 (16 address bytes), not IPv4 (4) ------------------------
FLAG_BORNHOST_V6 = 0x10
FLAG_STOREHOST_V6 = 0x20
IPV4_ADDR_SIZE = 4
IPV6_ADDR_SIZE = 16
#: extra bytes of a record per IPv6 host
IPV6_EXTRA = IPV6_ADDR_SIZE - IPV4_ADDR_SIZE

# --- fixed offsets (the picture above) -----------------------------------------------------------
OFF_TOTAL_SIZE = 0
OFF_MAGIC = 4
OFF_BODY_CRC = 8
OFF_QUEUE_ID = 12
OFF_FLAG = 16
OFF_QUEUE_OFFSET = 20
OFF_PHYSICAL_OFFSET = 28
OFF_SYS_FLAG = 36
OFF_BORN_TIMESTAMP = 40
OFF_BORN_HOST = 48
#: bytes of BORNPORT + STORETIMESTAMP (between the two hosts)
BETWEEN_HOSTS = 4 + 8
#: bytes of STOREPORT + RECONSUMETIMES + PREPAREDTRANSACTIONOFFSET + BODYLEN (store host to body)
AFTER_STORE_HOST = 4 + 4 + 8 + 4
PROPLEN_SIZE = 2
#: TOTALSIZE of a v1 record with IPv4 hosts and empty body, topic and properties
MIN_RECORD_SIZE = (OFF_BORN_HOST + IPV4_ADDR_SIZE + BETWEEN_HOSTS + IPV4_ADDR_SIZE
                   + AFTER_STORE_HOST + 1 + PROPLEN_SIZE)

# --- the properties string (docs/FORMAT.md §3) ---------------------------------------------------
NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"
PROPERTY_KEYS = "KEYS"
PROPERTY_TAGS = "TAGS"
PROPERTY_UNIQ_KEY = "UNIQ_KEY"
#: separates the tokens of a KEYS value (each non-empty token is an index key)
KEY_SEPARATOR = " "
#: the separators as the byte values kernels compare with
NAME_VALUE_BYTE = ord(NAME_VALUE_SEPARATOR)
PROPERTY_SEPARATOR_BYTE = ord(PROPERTY_SEPARATOR)
KEY_SEPARATOR_BYTE = ord(KEY_SEPARATOR)
#: between a topic and a key in an index key ("topic#key")
INDEX_KEY_SEPARATOR = "#"

# --- 5.x property CRC (``enabledAppendPropCRC``; docs/FORMAT.md §9.6) ------------------------------
#: the properties end with ``PROP_CRC_NAME`` \x01, ``PROP_CRC_DIGITS`` ASCII digits of the CRC-32
#: (& 0x7FFFFFFF, least significant first) of the record's bytes before these, then \x02
PROP_CRC_NAME = "__CRC32#"
PROP_CRC_DIGITS = 10
#: ``CommitLog.CRC32_RESERVED_LEN``: 20
PROP_CRC_SIZE = len(PROP_CRC_NAME) + 1 + PROP_CRC_DIGITS + 1
