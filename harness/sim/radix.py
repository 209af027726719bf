"""Radix prefix-cache model (pure): which prompt prefixes a server has already computed.

One radix tree per salt key ``(cache_salt, extra_key)``; a lookup never crosses keys, so a fresh
``cache_salt`` never hits.  Edges hold ``int32`` arrays, so memory is about 4 bytes per distinct cached
token.  When more than ``max_tokens`` tokens are held, whole trees are evicted least recently used first.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

I32 = npt.NDArray[np.int32]
SaltKey = tuple[str | None, str | None]


def _lcp(a: I32, b: I32) -> int:
    n = min(len(a), len(b))
    if n == 0:
        return 0
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if diff.size else n


class _Node:
    __slots__ = ("children", "edge")

    def __init__(self, edge: I32) -> None:
        self.edge = edge
        self.children: dict[int, _Node] = {}


class RadixCache:
    """Longest-prefix matching of token sequences, per salt key, with LRU eviction of whole keys."""

    def __init__(self, max_tokens: int) -> None:
        self.max_tokens = max_tokens
        self._trees: OrderedDict[SaltKey, _Node] = OrderedDict()
        self._sizes: dict[SaltKey, int] = {}
        self.total_tokens = 0

    def match(self, key: SaltKey, ids: Sequence[int] | I32) -> int:
        """Length (tokens) of the longest cached prefix of ``ids`` under ``key``."""
        node = self._trees.get(key)
        if node is None:
            return 0
        self._trees.move_to_end(key)
        arr = np.asarray(ids, dtype=np.int32)
        pos = 0
        while pos < len(arr):
            child = node.children.get(int(arr[pos]))
            if child is None:
                break
            n = _lcp(child.edge, arr[pos:])
            pos += n
            if n < len(child.edge):
                break
            node = child
        return pos

    def insert(self, key: SaltKey, ids: Sequence[int] | I32) -> None:
        """Remember ``ids`` (and so all its prefixes) under ``key``."""
        arr = np.array(ids, dtype=np.int32)
        node = self._trees.get(key)
        if node is None:
            node = self._trees[key] = _Node(np.zeros(0, dtype=np.int32))
            self._sizes[key] = 0
        self._trees.move_to_end(key)
        pos = 0
        added = 0
        while pos < len(arr):
            first = int(arr[pos])
            child = node.children.get(first)
            if child is None:
                node.children[first] = _Node(arr[pos:].copy())
                added += len(arr) - pos
                break
            n = _lcp(child.edge, arr[pos:])
            if n < len(child.edge):
                mid = _Node(child.edge[:n].copy())
                child.edge = child.edge[n:].copy()
                mid.children[int(child.edge[0])] = child
                node.children[first] = mid
                child = mid
            pos += n
            node = child
        self._sizes[key] += added
        self.total_tokens += added
        while self.total_tokens > self.max_tokens and self._trees:
            old, _ = self._trees.popitem(last=False)
            self.total_tokens -= self._sizes.pop(old)

    def clear(self) -> None:
        """Forget everything (``/flush_cache``)."""
        self._trees.clear()
        self._sizes.clear()
        self.total_tokens = 0
