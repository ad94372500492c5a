"""`python -m xlp_cli ...` is `xlp ...` (for environments where the `xlp` script is not on PATH)."""

from xlp_cli.cli.entry import main

if __name__ == "__main__":
    main()
