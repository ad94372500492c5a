"""The base layer: typed configs from flags and TOML (config.py), the error classes (errors.py), the terminal
(ui.py), the UTF-8 line reader (textfile.py) and joining or starting Ray (ray_cluster.py). It imports nothing else
of xlp."""
