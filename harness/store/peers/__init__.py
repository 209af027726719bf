"""Peer benchmark tools' result files in and out (edge: files).

- :mod:`.importer`: ``dsv4h import``: a peer tool's result file becomes an archive of claim class
  ``external``; its module docstring says which formats are read and what is refused.
- :mod:`.parse`: each source opened as a bounded regular file, hashed as read and parsed into
  per-request columns; :mod:`.docs`: the strict models of the peer documents (pure).
- :mod:`.export`: any archive written in a peer tool's format (``dsv4h export``).
- :mod:`.figures`: an import's key figures as the peer tool computed them (pure).

The public names used elsewhere are re-exported here (``from harness.store.peers import import_peer``).
"""

from __future__ import annotations

from harness.store.peers.importer import DEFINITIONS, IMPORT_MARKER, import_peer, recovered_import_run
from harness.store.peers.parse import GUIDELLM_REQUEST_KEYS, MAX_IMPORT_BYTES, ROW_SCHEMA, TOOLS, Tool, parse_peer

__all__ = [
    "DEFINITIONS",
    "GUIDELLM_REQUEST_KEYS",
    "IMPORT_MARKER",
    "MAX_IMPORT_BYTES",
    "ROW_SCHEMA",
    "TOOLS",
    "Tool",
    "import_peer",
    "parse_peer",
    "recovered_import_run",
]
