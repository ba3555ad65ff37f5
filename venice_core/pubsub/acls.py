"""What each Kafka principal (`security.principals`) may do, granted through the admin principal with confluent-kafka's
AdminClient: SCRAM users and ACLs in the KRaft metadata, which every broker's `StandardAuthorizer` enforces.

- `region-<r>` reads every topic (version topics, and every region's real-time topics, which its leaders replay);
  it writes one topic per version: its region's version topic, granted when the version is created.
- `davinci-client` reads every topic and writes none.
- `push.<store>` reads and writes the version topics of its store, each granted when the version is created (literal
  names: a prefix `<store>_v` would also match a store called `<store>_vx`).
- `nearline.<store>` writes its store's real-time topics, granted when the store becomes hybrid.
- `admin` and `broker` are super users (`embedded.kafka`); nobody else may create, delete or alter anything.

Readers also get READ on every consumer group (the platform's consumers name one; groups hold no data).
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import Future
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # public, re-exported implicitly
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialAlteration,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from venice_core.config import ClusterConfig, RegionConfig
from venice_core.errors import ComponentError
from venice_core.pubsub.admin import TIMEOUT_SECONDS, admin_client
from venice_core.security import principals

SCRAM_ITERATIONS = 4096  # Kafka's minimum for SCRAM-SHA-512


def _binding(principal: str, kind: ResourceType, name: str, operation: AclOperation) -> AclBinding:
    pattern = ResourcePatternType.LITERAL
    return AclBinding(kind, name, pattern, f"User:{principal}", "*", operation, AclPermissionType.ALLOW)


def _naming(principal: str) -> AclBindingFilter:
    """Every ACL of `principal`, whatever its resource, host and operation (None: any, as librdkafka takes it)."""
    anything: Any = None
    pattern, operation, permission = ResourcePatternType.ANY, AclOperation.ANY, AclPermissionType.ANY
    return AclBindingFilter(ResourceType.ANY, anything, pattern, f"User:{principal}", anything, operation, permission)


def _reader(principal: str) -> list[AclBinding]:
    return [_binding(principal, ResourceType.TOPIC, "*", AclOperation.READ), *_groups(principal)]


def _groups(principal: str) -> list[AclBinding]:
    return [_binding(principal, ResourceType.GROUP, "*", AclOperation.READ)]


def _wait(bootstrap: str, what: str, futures: Iterable[Future[Any]]) -> None:
    for future in futures:
        try:
            future.result(timeout=TIMEOUT_SECONDS)
        except KafkaException as exc:
            raise ComponentError(f"cannot {what} at {bootstrap}: {exc.args[0].str()}") from None
        except TimeoutError:
            raise ComponentError(f"cannot {what} at {bootstrap}: no answer within {TIMEOUT_SECONDS:.0f}s") from None


def ensure_users(config: ClusterConfig, bootstrap: str, users: Iterable[str]) -> None:
    """Each principal a SCRAM user with its password (set again if it is there: idempotent)."""
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, SCRAM_ITERATIONS)
    upserts: list[UserScramCredentialAlteration] = [
        UserScramCredentialUpsertion(u, info, principals.password(config, u).encode()) for u in users
    ]
    if upserts:
        admin = admin_client(bootstrap)  # referenced until its futures are done: destroyed, it fails them
        futures = admin.alter_user_scram_credentials(upserts, request_timeout=TIMEOUT_SECONDS)
        _wait(bootstrap, "set the Kafka users' credentials", futures.values())


def grant(bootstrap: str, bindings: list[AclBinding]) -> None:
    """The ACLs (creating one that exists is a no-op)."""
    if bindings:
        admin = admin_client(bootstrap)
        _wait(bootstrap, "grant Kafka ACLs", admin.create_acls(bindings, request_timeout=TIMEOUT_SECONDS).values())


def _bootstraps(regions: Iterable[RegionConfig]) -> dict[str, list[RegionConfig]]:
    """The regions by the Kafka they use (the embedded platform's share one)."""
    found: dict[str, list[RegionConfig]] = {}
    for region in regions:
        found.setdefault(region.kafka_bootstrap, []).append(region)
    return found


def grant_platform(config: ClusterConfig) -> int:
    """At `venice up`: the principals that exist from the start, and what they may read. Returns the grants' count."""
    count = 0
    for bootstrap in _bootstraps(config.regions):
        readers = [principals.DAVINCI, *(principals.region(r.name) for r in config.regions)]
        ensure_users(config, bootstrap, readers)
        bindings = [binding for reader in readers for binding in _reader(reader)]
        grant(bootstrap, bindings)
        count += len(bindings)
    return count


def grant_version(config: ClusterConfig, store: str, number: int, regions: Iterable[RegionConfig]) -> None:
    """When a version's topics are created: its store's push principal reads and writes them, and each region's
    principal writes its own region's."""
    push = principals.push(store)
    for bootstrap, placed in _bootstraps(regions).items():
        ensure_users(config, bootstrap, [push])
        bindings = list(_groups(push))
        for region in placed:
            topic = region.version_topic(store, number)
            bindings += [
                _binding(push, ResourceType.TOPIC, topic, op) for op in (AclOperation.READ, AclOperation.WRITE)
            ]
            bindings.append(_binding(principals.region(region.name), ResourceType.TOPIC, topic, AclOperation.WRITE))
        grant(bootstrap, bindings)


def grant_real_time(config: ClusterConfig, store: str) -> None:
    """When a store becomes hybrid: its nearline principal writes its real-time topic in every region."""
    writer = principals.nearline(store)
    for bootstrap, placed in _bootstraps(config.regions).items():
        ensure_users(config, bootstrap, [writer])
        topics = [region.real_time_topic(store) for region in placed]
        grant(bootstrap, [_binding(writer, ResourceType.TOPIC, topic, AclOperation.WRITE) for topic in topics])


def grant_source(config: ClusterConfig, bootstrap: str, topic: str, store: str) -> bool:
    """When a streaming pipeline starts: its store's nearline principal reads its source topic, if that topic is on
    one of the platform's Kafka clusters (another cluster's access is its own operators'). Whether it granted."""
    if bootstrap not in _bootstraps(config.regions):
        return False
    reader = principals.nearline(store)
    ensure_users(config, bootstrap, [reader])
    grant(bootstrap, [_binding(reader, ResourceType.TOPIC, topic, AclOperation.READ), *_groups(reader)])
    return True


def revoke_store(config: ClusterConfig, store: str, largest_version: int) -> None:
    """When a store is deleted: every ACL on its topics (versions 1 to `largest_version` and the real-time ones, in
    every region, whoever they name: its regions' write grants too), its principals' ACLs and SCRAM users, and their
    secrets and credentials files, so that a store made again under its name starts with none."""
    owned = [principals.push(store), principals.nearline(store)]
    for bootstrap, placed in _bootstraps(config.regions).items():
        admin = admin_client(bootstrap)
        topics = [r.version_topic(store, n) for r in placed for n in range(1, largest_version + 1)]
        topics += [r.real_time_topic(store) for r in placed]
        filters = [*(_on_topic(topic) for topic in topics), *(_naming(principal) for principal in owned)]
        _wait(bootstrap, "revoke Kafka ACLs", admin.delete_acls(filters, request_timeout=TIMEOUT_SECONDS).values())
        sha512 = ScramMechanism.SCRAM_SHA_512
        deletions: list[UserScramCredentialAlteration] = [UserScramCredentialDeletion(p, sha512) for p in owned]
        for future in admin.alter_user_scram_credentials(deletions, request_timeout=TIMEOUT_SECONDS).values():
            try:
                future.result(timeout=TIMEOUT_SECONDS)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.RESOURCE_NOT_FOUND:  # a principal that never was
                    raise ComponentError(f"cannot remove Kafka users at {bootstrap}: {exc.args[0].str()}") from None
    for principal in owned:
        principals.forget(config, principal)


def _on_topic(topic: str) -> AclBindingFilter:
    """Every ACL on the literal topic, whoever it names."""
    anything: Any = None
    pattern, operation, permission = ResourcePatternType.LITERAL, AclOperation.ANY, AclPermissionType.ANY
    return AclBindingFilter(ResourceType.TOPIC, topic, pattern, anything, anything, operation, permission)


def bindings_of(bootstrap: str, principal: str) -> list[AclBinding]:
    """The ACLs that name `principal`."""
    admin = admin_client(bootstrap)
    found = admin.describe_acls(_naming(principal), request_timeout=TIMEOUT_SECONDS)
    try:
        return list(found.result(timeout=TIMEOUT_SECONDS))
    except KafkaException as exc:
        raise ComponentError(f"cannot read Kafka ACLs at {bootstrap}: {exc.args[0].str()}") from None
