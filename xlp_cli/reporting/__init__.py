"""What reports are made of, shared by the tasks and the evaluate stage: tables and one HTML page (render.py),
figures (figures.py) and sentence embeddings of pretrained runs (embeddings.py)."""
