"""`venice store acl ...` (who may read a store from the region servers) and `venice security ...` (a principal's
certificate)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from venice_core.cli.context import metadata
from venice_core.controller import store_readers
from venice_core.embedded.platform import plan
from venice_core.errors import ConfigError
from venice_core.security import ca, principals
from venice_core.security.files import certificates_folder

acl_app = typer.Typer(help="Who may read a store from the region servers (a secured platform).", no_args_is_help=True)
security_app = typer.Typer(help="The platform's certificates for principals.", no_args_is_help=True)

StoreArg = typer.Argument(..., help="Store name.")
PrincipalOption = typer.Option(..., "--principal", help="The principal: its certificate's common name.")
ReadOption = typer.Option(False, "--read", help="Reads (the only permission a store's ACL holds).")


def _permission(read: bool) -> None:
    if not read:
        raise ConfigError("say which permission: --read (the only one a store's ACL holds)")


@acl_app.command("grant")
def grant(store: str = StoreArg, principal: str = PrincipalOption, read: bool = ReadOption) -> None:
    """Let a principal read the store: its values, schemas, dictionaries and routing table."""
    _permission(read)
    with metadata() as (_, meta):
        granted = store_readers.grant(meta, store, principal)
    typer.echo(f"{principal} {'may now read' if granted else 'could already read'} '{store}'")


@acl_app.command("revoke")
def revoke(store: str = StoreArg, principal: str = PrincipalOption, read: bool = ReadOption) -> None:
    """Stop a principal reading the store (the region servers refuse it within a second)."""
    _permission(read)
    with metadata() as (_, meta):
        revoked = store_readers.revoke(meta, store, principal)
    typer.echo(f"{principal} {'may no longer read' if revoked else 'could not read'} '{store}'")


@acl_app.command("list")
def list_(store: str = StoreArg, as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """The store's readers (the platform's own principals read every store besides)."""
    with metadata() as (_, meta):
        readers = store_readers.readers(meta, store)
    if as_json:
        typer.echo(json.dumps({"store": store, "read": readers}))
    elif readers:
        typer.echo("\n".join(f"{principal}\tread" for principal in readers))
    else:
        typer.echo(f"no principal may read '{store}' but the platform's own")


@security_app.command("certificate")
def certificate(
    principal: str = typer.Argument(..., help="The principal: the certificate's common name."),
    out: Path | None = typer.Option(None, "--out", help="The folder to write it to (default: the data dir's certs)."),
) -> None:
    """Issue a client certificate of the platform's CA for a principal (kept while still good), for a reader's
    `security.client.cert` and `security.client.key`."""
    store_readers.check_principal(principal)
    with metadata() as (config, _):
        if not config.security.enabled:
            raise ConfigError("this platform is not secured (security.enabled=false): it issues no certificates")
        reserved = {*ca.CLIENT_ROLES, *principals.SUPER_USERS, *(p.name for p in plan(config))}
        if principal in reserved or principal.startswith(("kafka", "region-", "push.", "nearline.")):
            raise ConfigError(f"{principal!r} is a name of the platform's own: choose another for a reader")
        issued = ca.authority(config).issue(out or certificates_folder(config), principal, server=False)
    typer.echo(f"certificate {issued.cert}\nkey {issued.key} (mode 0600)\nexpires {issued.not_after:%Y-%m-%d}")
