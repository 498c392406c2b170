"""Fetching model data onto this host: local folders and files, `file://`, `s3://`, `hf://`, `model.tar.gz`
archives, into a content-addressed store."""
