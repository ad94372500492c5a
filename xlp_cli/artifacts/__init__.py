"""The artifact contract between stages (docs/artifacts.md): every stage reads its inputs and writes its outputs
through these modules, lowest first:

    special_ids.py     THE special token ids (XLM's dictionary layout)
    files.py           atomic writes (a temporary name, renamed when complete), the one-line error for a full disk
                       or a read-only folder, the umask's file mode, sha256, `inside` (a path read from a file
                       stays in its folder), `data_dir` (the shared real corpora)
    layout.py          the format's self-description: its version, THE shard paths, shard metadata, the dictionary
                       layout, siblings
    shards.py          Parquet shards written, listed, read and streamed; `verify_shards`
    manifest.py        manifests written last and read with their checks; `find_upstream`
    outdir.py          a stage's --out: the lock, files xlp did not write, --force, the sweep; `guard_out_dir`
    staged_parquet.py  a shard written a row group at a time under a temporary name
    datadirs.py        several --data folders
    arrow_numpy.py     Arrow columns as numpy arrays (and pyarrow kept from importing pandas)
    uris.py            s3://, gs://, hf:// URIs and the local staging folder of each (light: read at start-up)
    objectstore.py     the store behind a URI (pyarrow.fs), its errors as one line
    remote_sync.py     a folder pulled from / pushed to its store: a journaled push, the manifest last
    lease.py           the lease object that keeps one writer per --out URI
    staging.py         a stage run on staging folders (`stages.run_staged`; docs/storage.md)

A shard exists only when complete (temp file + rename); the manifest is written last. This file imports nothing,
so a light module here (special_ids, files, layout) costs no pyarrow to whoever imports it.
"""
