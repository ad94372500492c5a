"""`xlp prepare`: raw sources -> cleaned, normalized, tokenized, split Parquet shards."""
