"""Who may read a store from the region servers (`venice store acl`): its readers, kept in the metadata store. The
platform's own principals (`security.tls.PLATFORM_PRINCIPALS`) read every store and need no grant."""

from __future__ import annotations

import re

from sqlalchemy import delete, select

from venice_core.controller.stores import get_store
from venice_core.errors import ConfigError
from venice_core.meta import MetadataStore
from venice_core.meta.models import StoreReader

# A principal is a certificate's common name: what `venice security certificate` issues takes the same names.
PRINCIPAL_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,254}")


def check_principal(principal: str) -> str:
    if not PRINCIPAL_PATTERN.fullmatch(principal or ""):
        raise ConfigError(
            f"invalid principal {principal!r}: letters, digits, '_', '.', '@' and '-', starting with a letter or digit"
        )
    return principal


def grant(meta: MetadataStore, store: str, principal: str) -> bool:
    """Let `principal` read `store`; False if it already could."""
    check_principal(principal)
    with meta.session() as session:
        get_store(session, store)
        if session.get(StoreReader, (store, principal)) is not None:
            return False
        session.add(StoreReader(store_name=store, principal=principal))
    return True


def revoke(meta: MetadataStore, store: str, principal: str) -> bool:
    """Take `store` away from `principal`; False if it could not read it."""
    check_principal(principal)
    with meta.session() as session:
        get_store(session, store)
        removed = session.execute(
            delete(StoreReader).where(StoreReader.store_name == store, StoreReader.principal == principal)
        )
    return bool(getattr(removed, "rowcount", 0))


def readers(meta: MetadataStore, store: str) -> list[str]:
    with meta.session() as session:
        get_store(session, store)
        query = select(StoreReader.principal).where(StoreReader.store_name == store).order_by(StoreReader.principal)
        return list(session.scalars(query))


def every_reader(meta: MetadataStore) -> dict[str, frozenset[str]]:
    """Each store's readers (stores without any left out): what a region server checks each read against."""
    found: dict[str, set[str]] = {}
    with meta.session() as session:
        for store, principal in session.execute(select(StoreReader.store_name, StoreReader.principal)):
            found.setdefault(store, set()).add(principal)
    return {store: frozenset(principals) for store, principals in found.items()}
