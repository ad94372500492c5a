"""`python -m xlp_cli.cli ...` (and `torchrun -m xlp_cli.cli ...`) is `xlp ...`."""

from xlp_cli.cli.app import main

if __name__ == "__main__":
    main()
