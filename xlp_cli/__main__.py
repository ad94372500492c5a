"""`python -m xlp_cli` = the `xlp` command."""

from xlp_cli.entry import main

main()
