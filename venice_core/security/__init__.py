"""The platform's security material: `ca`, its certificate authority and the certificates it issues to each host and
role (Python's `cryptography`, no shell calls to openssl), kept in the data dir with private keys readable by their
owner alone. Below `embedded` (which makes them at `venice up`) and above `config`."""
