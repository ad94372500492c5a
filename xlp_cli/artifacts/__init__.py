"""The artifact contract between stages: manifests, atomic writes, Parquet shards (docs/artifacts.md).

Every stage reads its inputs and writes its outputs through this package: `files.py` (atomic writes, `inside`),
`layout.py` (the format's self-description), `shards.py` (Parquet shards, `verify_shards`), `manifest.py`
(manifests, `find_upstream`), `outdir.py` (a stage's --out: lock, claim, sweep), `staged_parquet.py` (a shard
written a row group at a time), `datadirs.py` (several --data folders), `special_ids.py` (the dictionary's
special tokens), `arrow_numpy.py` (Arrow columns as numpy arrays). This module names the ones stages call, so
`artifacts.write_shard(...)` reads the same wherever it is used; the modules below never import it.
A shard exists only when complete (temp file + rename); the manifest is written last.
"""

from __future__ import annotations

from xlp_cli.artifacts.files import (atomic_folder, atomic_path, data_dir, inside, sha256_file, truncate_jsonl,
                                     write_failed, write_json_atomic, write_text_atomic)
from xlp_cli.artifacts.manifest import (config_hash, find_upstream, ids_dictionary, new_manifest, now_iso,
                                        read_manifest, software_versions, try_read_manifest, write_manifest)
from xlp_cli.artifacts.outdir import guard_out_dir
from xlp_cli.artifacts.shards import (HASH_LIMIT, MANIFEST, PARQUET_COMPRESSION, SHARD_GLOB, iter_batches,
                                      read_shard, shard_entry, shard_paths, verify_shards, write_shard)

__all__ = ["HASH_LIMIT", "MANIFEST", "PARQUET_COMPRESSION", "SHARD_GLOB", "atomic_folder", "atomic_path",
           "config_hash", "data_dir", "find_upstream", "guard_out_dir", "ids_dictionary", "inside", "iter_batches",
           "new_manifest", "now_iso", "read_manifest", "read_shard", "sha256_file", "shard_entry", "shard_paths",
           "software_versions", "truncate_jsonl", "try_read_manifest", "verify_shards", "write_failed",
           "write_json_atomic", "write_manifest", "write_shard", "write_text_atomic"]
