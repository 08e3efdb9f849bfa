"""Limits on JSON text read from outside: the deposit bodies, the AVS metadata documents and
the LAT manifests."""

from __future__ import annotations

# A deposit body needs 2 levels, a metadata document 1, a manifest 4; unknown members may nest
# a little.
MAX_JSON_NESTING = 32


def nested_deeper_than(raw: bytes, limit: int) -> bool:
    """Whether JSON text nests arrays/objects deeper than `limit` (strings skipped).

    json's C scanner recurses per level, and py_ecc (imported with web3) raises Python's
    recursion limit to 100,000, past what the C stack holds: a body of ~100,000 "[" would crash
    the worker instead of raising. The fast path counts brackets in C; only a body with more
    brackets than `limit` is walked byte by byte.
    """
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False
    depth = 0
    in_string = escaped = False
    for byte in raw:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            if depth > limit:
                return True
        elif byte in (0x5D, 0x7D):  # ] }
            depth -= 1
    return False
