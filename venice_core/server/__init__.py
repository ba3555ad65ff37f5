"""The region server: hosts the store-versions of one region, ingests them, serves reads over HTTP."""
