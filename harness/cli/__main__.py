"""``python -m harness.cli`` runs the dsv4h command line."""

from harness.cli import main

main()
