"""The command line: the console script (entry.py), the Typer app built from the stage table (app.py), one command
per stage (commands.py) and click values without pydantic (typer_plain.py). Nothing below imports it."""
