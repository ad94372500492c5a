"""`xlp run RECIPE.toml`: the recipe stage (run.py) over the stage table, the end-of-run report (report.py), `--jobs N`
(jobs.py) and the classification task derived from gettext catalogs (catalog_task.py)."""
